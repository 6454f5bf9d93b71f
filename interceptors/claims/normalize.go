package claims

import (
	"fmt"
	"strings"
)

// MaxDepth bounds the nesting of objects and arrays in a claims block (the
// contract needs 3) and the brace depth the fallback scanner tracks.
const MaxDepth = 64

// MaxBlockBytes bounds the size of a claims block; a larger block is reported as
// claims.json_invalid without being parsed.
const MaxBlockBytes = 1 << 20

const bom = "\uFEFF"

// Normalize turns tolerant JSON into strict JSON bytes: it removes byte order marks,
// // line comments (up to, not including, the line break), /* */ block comments
// (replaced by one space) and trailing commas before ] or }, all outside strings.
// Everything else is copied unchanged, so the result is valid JSON exactly when the
// input is valid apart from those. It returns an error for an unterminated string or
// block comment and for nesting deeper than MaxDepth. When there is nothing to
// remove it returns a copy of src.
func Normalize(src []byte) ([]byte, error) {
	s, err := NormalizeString(string(src))
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// NormalizeString is Normalize for a string. When there is nothing to remove it
// returns s itself without allocating.
func NormalizeString(s string) (string, error) {
	var b []byte // nil while the output is s[:i] unchanged
	changed := false
	begin := func(i int) {
		if !changed {
			b = make([]byte, 0, len(s))
			b = append(b, s[:i]...)
			changed = true
		}
	}
	comma := -1 // output index of the last significant byte when it is a comma
	depth := 0
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			j, ok := stringEnd(s, i)
			if !ok {
				return "", fmt.Errorf("unterminated string starting at byte %d", i)
			}
			if changed {
				b = append(b, s[i:j]...)
			}
			comma = -1
			i = j
			continue
		case c == '/' && i+1 < len(s) && s[i+1] == '/':
			begin(i)
			if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
				i += j
			} else {
				i = len(s)
			}
			continue
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			begin(i)
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return "", fmt.Errorf("unterminated /* comment starting at byte %d", i)
			}
			b = append(b, ' ')
			i += 2 + j + 2
			continue
		case c == bom[0] && strings.HasPrefix(s[i:], bom):
			begin(i)
			i += len(bom)
			continue
		case c == ',':
			if changed {
				comma = len(b)
			} else {
				comma = i
			}
		case c == '}' || c == ']':
			if comma >= 0 {
				begin(i)
				b = append(b[:comma], b[comma+1:]...)
				comma = -1
			}
			depth--
		case c == '{' || c == '[':
			depth++
			if depth > MaxDepth {
				return "", fmt.Errorf("nesting deeper than %d at byte %d", MaxDepth, i)
			}
			comma = -1
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			// Whitespace keeps a pending comma pending.
		default:
			comma = -1
		}
		if changed {
			b = append(b, c)
		}
		i++
	}
	if !changed {
		return s, nil
	}
	return string(b), nil
}

// stringEnd returns the index just after the JSON string that starts with the quote
// at s[i], and false when the string is not closed.
func stringEnd(s string, i int) (int, bool) {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return len(s), false
}
