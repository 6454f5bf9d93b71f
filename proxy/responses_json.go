package proxy

import (
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// A Responses request often carries an operation log of tens of kilobytes in one
// string. gjson decodes every string value it walks past in ForEach (and any value
// it returns), so the translation walks the request with the raw scanners below:
// members and elements come out as their raw JSON, and only the short values the
// translation reads (types, roles, ids) are decoded. The input must be valid JSON
// (the proxy checks every body with gjson.ValidBytes first).

// bytesView views b as a string without copying; b must not change while the
// string or anything taken from it is in use.
func bytesView(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// eachRawMember calls fn with each member of the JSON object obj: its key as
// written between the quotes (escapes not decoded) and its raw value. It stops when
// fn returns false. obj that is not an object yields nothing.
func eachRawMember(obj string, fn func(key, raw string) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		kEnd := stringEnd(obj, i)
		key := obj[i+1 : kEnd-1]
		i = skipSpace(obj, kEnd)
		i = skipSpace(obj, i+1) // past ':'
		vEnd := valueEnd(obj, i)
		if !fn(key, obj[i:vEnd]) {
			return
		}
		i = skipSpace(obj, vEnd)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
}

// rawMemberOf returns the raw value of obj's member named key as written ("" when
// it has none).
func rawMemberOf(obj, key string) string {
	var out string
	eachRawMember(obj, func(k, raw string) bool {
		if k == key {
			out = raw
			return false
		}
		return true
	})
	return out
}

// eachRawElement calls fn with each element's raw JSON of the JSON array arr, and
// its position. It stops when fn returns false. arr that is not an array yields
// nothing.
func eachRawElement(arr string, fn func(i int, raw string) bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i = skipSpace(arr, i+1)
	for n := 0; i < len(arr) && arr[i] != ']'; n++ {
		end := valueEnd(arr, i)
		if !fn(n, arr[i:end]) {
			return
		}
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string starting at s[i] ('"').
func stringEnd(s string, i int) int {
	j := i + 1
	for {
		k := strings.IndexByte(s[j:], '"')
		if k < 0 {
			return len(s)
		}
		j += k
		// A quote is escaped when an odd number of backslashes precede it.
		n := 0
		for b := j - 1; b > i && s[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// valueEnd returns the index just past the JSON value starting at s[i].
func valueEnd(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	switch s[i] {
	case '"':
		return stringEnd(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				j = stringEnd(s, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(s)
	}
	j := i
	for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] != ' ' && s[j] != '\t' && s[j] != '\n' && s[j] != '\r' {
		j++
	}
	return j
}

// rawString decodes a short raw JSON value as a string ("" when it is not one).
func rawString(raw string) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	if strings.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	return gjson.Parse(raw).Str
}

// isRawString, isRawArray and isRawNull tell a raw JSON value's kind; an absent
// value ("") is none of them.
func isRawString(raw string) bool { return raw != "" && raw[0] == '"' }
func isRawArray(raw string) bool  { return raw != "" && raw[0] == '[' }
func isRawNull(raw string) bool   { return raw == "null" }
