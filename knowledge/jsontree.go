package knowledge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// jsonKind is the type of one decoded JSON value.
type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonObject
	jsonArray
)

func (k jsonKind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an object", "an array"}[k]
}

// jsonValue is a decoded JSON value that remembers where it starts and keeps object
// members in file order, so that set files load deterministically and every error
// can name its line and column.
type jsonValue struct {
	kind    jsonKind
	off     int64
	str     string
	boolean bool
	num     json.Number
	members []jsonMember
	items   []*jsonValue
}

type jsonMember struct {
	key    string
	keyOff int64
	val    *jsonValue
}

// jsonSyntaxError is malformed JSON at a byte offset.
type jsonSyntaxError struct {
	off int64
	msg string
}

func (e *jsonSyntaxError) Error() string { return e.msg }

const maxJSONDepth = 200

// parseJSONTree decodes data into an ordered tree. Errors are *jsonSyntaxError.
func parseJSONTree(data []byte) (*jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseJSONValue(dec, data, 0)
	if err != nil {
		return nil, err
	}
	off := skipJSONSpace(data, dec.InputOffset())
	if _, err := dec.Token(); err != io.EOF {
		return nil, &jsonSyntaxError{off: off, msg: "unexpected data after the top-level value"}
	}
	return v, nil
}

func parseJSONValue(dec *json.Decoder, data []byte, depth int) (*jsonValue, error) {
	off := skipJSONSpace(data, dec.InputOffset())
	if depth > maxJSONDepth {
		return nil, &jsonSyntaxError{off: off, msg: fmt.Sprintf("nesting deeper than %d levels", maxJSONDepth)}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxError(err, data, off)
	}
	v := &jsonValue{off: off}
	switch t := tok.(type) {
	case nil:
		v.kind = jsonNull
	case bool:
		v.kind, v.boolean = jsonBool, t
	case json.Number:
		v.kind, v.num = jsonNumber, t
	case string:
		v.kind, v.str = jsonString, t
	case json.Delim:
		switch t {
		case '{':
			v.kind = jsonObject
			for dec.More() {
				keyOff := skipJSONSpace(data, dec.InputOffset())
				kt, err := dec.Token()
				if err != nil {
					return nil, syntaxError(err, data, keyOff)
				}
				key, _ := kt.(string) // the decoder only yields string keys inside objects
				val, err := parseJSONValue(dec, data, depth+1)
				if err != nil {
					return nil, err
				}
				v.members = append(v.members, jsonMember{key: key, keyOff: keyOff, val: val})
			}
		case '[':
			v.kind = jsonArray
			for dec.More() {
				item, err := parseJSONValue(dec, data, depth+1)
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, item)
			}
		}
		endOff := skipJSONSpace(data, dec.InputOffset())
		if _, err := dec.Token(); err != nil {
			return nil, syntaxError(err, data, endOff)
		}
	}
	return v, nil
}

// syntaxError turns a decoder error into a positioned one.
func syntaxError(err error, data []byte, off int64) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &jsonSyntaxError{off: se.Offset, msg: se.Error()}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &jsonSyntaxError{off: int64(len(data)), msg: "unexpected end of JSON input"}
	}
	return &jsonSyntaxError{off: off, msg: err.Error()}
}

// skipJSONSpace returns the offset of the next token at or after off: the decoder's
// InputOffset points behind the previous token, before separators and white space.
func skipJSONSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\n', '\r', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// lineColumn converts a byte offset into a 1-based line and a 1-based column
// counted in characters (runes), as editors show them.
func lineColumn(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	start := bytes.LastIndexByte(before, '\n') + 1
	col = 1 + utf8.RuneCount(before[start:])
	return line, col
}
