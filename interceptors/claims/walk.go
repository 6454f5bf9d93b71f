package claims

import "github.com/factgate/factgate/knowledge/rawjson"

// The block is read in one walk over its text (it passed rawjson's check, so the
// walk needs no error handling of its own): rawjson.ScanMembers and ScanElements
// visit the members and elements, and the parser reads each value it needs where it
// finds it and hands back the offset just past it, so no level of the block is
// scanned again to find the end of what a deeper level already read. The values the
// parser does not read are skipped by the scanner.
//
// Strings are decoded with rawjson.StringValue, which gives gjson's decoding of
// valid JSON (a lone surrogate escape becomes U+FFFD, a surrogate pair one rune):
// parser_diff_test.go compares them on every value of fuzzed blocks.

// value is one JSON value the parser keeps: its text and, for a string, its
// decoded value. The zero value is an absent field.
type value struct {
	raw string // the JSON text; "" when absent
	str string // a string's decoded value; "" for other values
}

// readValue reads the value starting at s[i] and returns it with the offset just
// past it.
func readValue(s string, i int) (value, int) {
	if s[i] == '"' {
		str, end := readString(s, i)
		return value{raw: s[i:end], str: str}, end
	}
	end := rawjson.ValueEnd(s, i)
	return value{raw: s[i:end]}, end
}

// readString decodes the string whose opening quote is s[i] and returns it with
// the offset just past its closing quote. Without escapes it aliases s.
func readString(s string, i int) (string, int) {
	end := rawjson.ValueEnd(s, i)
	str, _ := rawjson.StringValue(s[i:end])
	return str, end
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
