package interceptors

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrBudgetExhausted is the cause (context.Cause) of a context the hidden
// revision's wall-clock budget ended. A response phase that sees it tells the
// budget apart from a client that went away (context.Canceled).
var ErrBudgetExhausted = errors.New("the revision budget is spent")

// Error is an error factgate itself reports to a client. It carries the HTTP status
// and renders as the OpenAI error envelope {"error":{"message","type","param","code"}}.
type Error struct {
	Status int
	// Type is the OpenAI error type ("invalid_request_error", "authentication_error",
	// "server_error", "upstream_error").
	Type    string
	Message string
	// Param names the offending request field, when there is one.
	Param string
	// Code is a stable machine-readable code ("invalid_json", "model_not_found").
	Code string
	// Err is the wrapped cause, never shown to the client.
	Err error
}

// Errorf builds an *Error with a formatted message.
func Errorf(status int, typ, code, format string, args ...any) *Error {
	return &Error{Status: status, Type: typ, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Envelope renders the OpenAI error envelope.
func (e *Error) Envelope() []byte {
	var param, code any
	if e.Param != "" {
		param = e.Param
	}
	if e.Code != "" {
		code = e.Code
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": e.Message,
		"type":    e.Type,
		"param":   param,
		"code":    code,
	}})
	return b
}

// AsError returns err as an *Error, or nil when it is not one.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
