package knowledge

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/factgate/factgate/knowledge/rawjson"
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

// parseJSONTree decodes data into an ordered tree. Errors are *jsonSyntaxError. The
// bounded check comes first, so that the tree's recursion is at most
// rawjson.DefaultMaxDepth deep: a file nested deeper is a load error naming the
// file, line and column, not a stack overflow.
func parseJSONTree(data []byte) (*jsonValue, error) {
	if err := rawjson.Check(data, rawjson.DefaultMaxDepth); err != nil {
		var se *rawjson.SyntaxError
		if errors.As(err, &se) {
			return nil, &jsonSyntaxError{off: int64(se.Offset), msg: se.Problem}
		}
		return nil, &jsonSyntaxError{msg: err.Error()}
	}
	s := string(data)
	start := len(s) - len(strings.TrimLeft(s, " \t\r\n"))
	return jsonTree(strings.TrimRight(s[start:], " \t\r\n"), int64(start)), nil
}

// jsonTree builds the tree of the valid JSON value raw found at offset off.
func jsonTree(raw string, off int64) *jsonValue {
	v := &jsonValue{off: off}
	switch raw[0] {
	case '{':
		v.kind = jsonObject
		rawjson.EachMember(raw, func(m rawjson.Member) bool {
			v.members = append(v.members, jsonMember{
				key:    decodedString(rawjson.Key(m.Key)),
				keyOff: off + int64(m.KeyOff),
				val:    jsonTree(m.Raw, off+int64(m.Off)),
			})
			return true
		})
	case '[':
		v.kind = jsonArray
		rawjson.EachElement(raw, func(e rawjson.Value) bool {
			v.items = append(v.items, jsonTree(e.Raw, off+int64(e.Off)))
			return true
		})
	case '"':
		str, _ := rawjson.StringValue(raw)
		v.kind, v.str = jsonString, decodedString(str)
	case 't', 'f':
		v.kind, v.boolean = jsonBool, raw[0] == 't'
	case 'n':
		v.kind = jsonNull
	default:
		v.kind, v.num = jsonNumber, json.Number(raw)
	}
	return v
}

// decodedString replaces each byte that is not UTF-8 with U+FFFD, as encoding/json
// decodes strings; the copy also keeps the tree from holding the whole file.
func decodedString(s string) string {
	if utf8.ValidString(s) {
		return strings.Clone(s)
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // an invalid byte ranges as one utf8.RuneError
	}
	return b.String()
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
