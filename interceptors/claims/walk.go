package claims

import (
	"strings"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// The block is read in one walk over its text with rawjson.Walker, which checks
// the text as it goes: the parser reads each value it needs where the walker meets
// it and hands back the offset just past it, so no level of the block is scanned
// again to find the end of what a deeper level already read, and no separate pass
// checks the block first. The values the parser does not read are checked and
// skipped by the walker. A walk that fails leaves nothing behind (see
// Parser.read).
//
// Strings are decoded as rawjson.StringValue decodes them, which is gjson's
// decoding of valid JSON (a lone surrogate escape becomes U+FFFD, a surrogate pair
// one rune): parser_diff_test.go compares them on every value of fuzzed blocks.

// value is one JSON value the parser keeps: its text and, for a string, its
// decoded value. The zero value is an absent field.
type value struct {
	raw string // the JSON text; "" when absent
	str string // a string's decoded value; "" for other values
}

// readValue reads the value starting at s[i] with w and returns it with the
// offset just past it, or the zero value and -1 when the walk failed.
func readValue(w *rawjson.Walker, s string, i int) (value, int) {
	if s[i] == '"' {
		str, end := w.String(i)
		if end < 0 {
			return value{}, -1
		}
		return value{raw: s[i:end], str: str}, end
	}
	end := w.Value(i)
	if end < 0 {
		return value{}, -1
	}
	return value{raw: s[i:end]}, end
}

// exists reports a field that is present.
func (v value) exists() bool { return v.raw != "" }

// isString reports a JSON string.
func (v value) isString() bool { return v.raw != "" && v.raw[0] == '"' }

// text returns a string's value, or "" for anything else.
func (v value) text() string { return v.str }

// rawText returns a string's value, or another value's JSON text.
func (v value) rawText() string {
	if v.isString() {
		return v.str
	}
	return v.raw
}

// jsonType names the type of the valid JSON value raw (white space may precede
// it) as the issues do: object, array, string, number, boolean or null.
func jsonType(raw string) string {
	i := skipSpace(raw, 0)
	if i >= len(raw) {
		return "null"
	}
	switch raw[i] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// isNumber reports a JSON number.
func (v value) isNumber() bool {
	return v.raw != "" && (v.raw[0] == '-' || '0' <= v.raw[0] && v.raw[0] <= '9')
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// trimSpace is strings.TrimSpace without the call for the text the parser trims
// most, a value that neither starts nor ends with space: TrimSpace removes only
// ASCII white space and Unicode spaces (whose UTF-8 bytes are all >= 0x80), so a
// text whose first and last bytes are printable ASCII other than the space is
// returned as it is.
func trimSpace(s string) string {
	if s != "" && asciiGraphic[s[0]]&asciiGraphic[s[len(s)-1]] != 0 {
		return s
	}
	return strings.TrimSpace(s)
}

// asciiGraphic is 1 for the printable ASCII bytes other than the space, else 0.
var asciiGraphic = func() (t [256]uint8) {
	for c := '!'; c <= '~'; c++ {
		t[c] = 1
	}
	return t
}()
