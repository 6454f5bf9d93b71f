package mockupstream

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// Echo is what /echo/... answers: the request as the mock received it. Tests of
// pass-through transparency decode it to compare what the client sent with what
// reached the upstream.
type Echo struct {
	Method string `json:"method"`
	// Path is the request path, e.g. "/echo/anything".
	Path string `json:"path"`
	// Query is the raw query string, without "?".
	Query string `json:"query"`
	// Host is the Host header the mock received.
	Host   string      `json:"host"`
	Header http.Header `json:"headers"`
	// Body is the body as text; empty when it is not valid UTF-8 (see BodyBase64).
	Body string `json:"body"`
	// BodyBase64 is the body, byte for byte, in standard base64.
	BodyBase64 string `json:"body_base64"`
}

// serveEcho answers /echo/... (any method) with an Echo of the request.
func (s *Server) serveEcho(ex *exchange) {
	body, err := ex.readBody()
	if ex.rec != nil {
		ex.rec.Body = body
	}
	if err != nil {
		if errors.Is(err, errBodyTooLarge) {
			ex.writeError(http.StatusRequestEntityTooLarge, "invalid_request_error", "body_too_large", "", err.Error())
		}
		return
	}
	r := ex.r
	e := Echo{
		Method:     r.Method,
		Path:       r.URL.Path,
		Query:      r.URL.RawQuery,
		Host:       r.Host,
		Header:     r.Header,
		BodyBase64: base64.StdEncoding.EncodeToString(body),
	}
	if utf8.Valid(body) {
		e.Body = string(body)
	}
	out, err := json.Marshal(e)
	if err != nil {
		ex.writeError(http.StatusInternalServerError, "server_error", "", "", "mock upstream: encoding the echo: "+err.Error())
		return
	}
	h := ex.w.Header()
	h["Content-Type"] = contentTypeJSON
	h["Content-Length"] = []string{strconv.Itoa(len(out))}
	ex.writeHeader(http.StatusOK)
	ex.write(out)
}

// serveModels answers GET /v1/models (the list) and GET /v1/models/{id} (one model, or
// a 404 envelope for an id not in the list).
func (s *Server) serveModels(ex *exchange, id string) {
	if ex.r.Method != http.MethodGet {
		ex.writeError(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "",
			ex.r.Method+" "+ex.r.URL.Path+" is not supported; use GET")
		return
	}
	created := s.now().Unix()
	appendModel := func(b []byte, m string) []byte {
		b = append(b, `{"id":`...)
		b = rawjson.AppendString(b, m)
		b = append(b, `,"object":"model","created":`...)
		b = strconv.AppendInt(b, created, 10)
		return append(b, `,"owned_by":"factgate-mock"}`...)
	}
	var b []byte
	if id == "" {
		b = append(b, `{"object":"list","data":[`...)
		for i, m := range s.models {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendModel(b, m)
		}
		b = append(b, `]}`...)
	} else {
		for _, m := range s.models {
			if m == id {
				b = appendModel(b, m)
			}
		}
		if b == nil {
			ex.writeError(http.StatusNotFound, "invalid_request_error", "model_not_found", "model",
				"the model "+strconv.Quote(id)+" does not exist")
			return
		}
	}
	h := ex.w.Header()
	h["Content-Type"] = contentTypeJSON
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	ex.writeHeader(http.StatusOK)
	ex.write(b)
}
