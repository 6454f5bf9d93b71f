package proxy

import (
	"unsafe"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// A Responses request often carries an operation log of tens of kilobytes in one
// string. gjson decodes every string value it walks past in ForEach (and any value
// it returns), so the translation walks the request with rawjson's scanner: members
// and elements come out as their raw JSON, and only the short values the
// translation reads (types, roles, ids) are decoded. The input must be valid JSON
// (the proxy checks every body with rawjson.Check first).

// bytesView views b as a string without copying; b must not change while the
// string or anything taken from it is in use.
//
// unsafe: a string over b without a copy, read only while b is unchanged (docs/architecture.md, Lifetimes).
func bytesView(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// eachRawMember calls fn with each member of the JSON object obj: its key decoded
// and its raw value. It stops when fn returns false. obj that is not an object
// yields nothing.
func eachRawMember(obj string, fn func(key, raw string) bool) {
	rawjson.EachMember(obj, func(m rawjson.Member) bool { return fn(rawjson.Key(m.Key), m.Raw) })
}

// rawMemberOf returns the raw value of obj's member named key ("" when it has
// none; with a duplicate name the last one, as the upstream's decoder reads it).
func rawMemberOf(obj, key string) string {
	v, _ := rawjson.Find(obj, key)
	return v.Raw
}

// eachRawElement calls fn with each element's raw JSON of the JSON array arr, and
// its position. It stops when fn returns false. arr that is not an array yields
// nothing.
func eachRawElement(arr string, fn func(i int, raw string) bool) {
	n := 0
	rawjson.EachElement(arr, func(v rawjson.Value) bool {
		ok := fn(n, v.Raw)
		n++
		return ok
	})
}

// rawString decodes a raw JSON value as a string ("" when it is not one).
func rawString(raw string) string {
	s, _ := rawjson.StringValue(raw)
	return s
}

// isRawString, isRawArray and isRawNull tell a raw JSON value's kind; an absent
// value ("") is none of them.
func isRawString(raw string) bool { return raw != "" && raw[0] == '"' }
func isRawArray(raw string) bool  { return raw != "" && raw[0] == '[' }
func isRawNull(raw string) bool   { return raw == "null" }
