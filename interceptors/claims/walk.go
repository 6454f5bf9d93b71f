package claims

import "github.com/factgate/factgate/knowledge/rawjson"

// The block's arrays and objects are walked with rawjson's scanner (the block
// passed rawjson.CheckString): each value's raw text is found once, by a scan that
// decodes nothing, and only the values the parser reads are then decoded with
// gjson.Parse. gjson's ForEach decoded every member (and skipped each object
// element twice: once to find its end, once to read its fields).

// elements iterates the elements of a valid JSON array, in order.
type elements struct {
	s string
	i int // offset of the next element, or -1
}

func elementsOf(arr string) elements {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return elements{i: -1}
	}
	i = skipSpace(arr, i+1)
	if i >= len(arr) || arr[i] == ']' {
		return elements{i: -1}
	}
	return elements{s: arr, i: i}
}

// next returns the next element's raw text; false at the end.
func (it *elements) next() (string, bool) {
	if it.i < 0 {
		return "", false
	}
	e := rawjson.ValueEnd(it.s, it.i)
	if e < 0 {
		it.i = -1
		return "", false
	}
	v := it.s[it.i:e]
	it.i = after(it.s, e)
	return v, true
}

// members iterates the members of a valid JSON object, in order, duplicates
// included.
type members struct {
	s string
	i int // offset of the next key's opening quote, or -1
}

func membersOf(obj string) members {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return members{i: -1}
	}
	i = skipSpace(obj, i+1)
	if i >= len(obj) || obj[i] != '"' {
		return members{i: -1}
	}
	return members{s: obj, i: i}
}

// next returns the next member's key as written (without its quotes, escapes
// kept: decode it with rawjson.Key) and its value's raw text; false at the end.
func (it *members) next() (key, value string, ok bool) {
	if it.i < 0 {
		return "", "", false
	}
	s := it.s
	ke := rawjson.ValueEnd(s, it.i)
	if ke < 0 {
		it.i = -1
		return "", "", false
	}
	key = s[it.i+1 : ke-1]
	i := skipSpace(s, ke)
	if i >= len(s) || s[i] != ':' {
		it.i = -1
		return "", "", false
	}
	i = skipSpace(s, i+1)
	ve := rawjson.ValueEnd(s, i)
	if ve < 0 {
		it.i = -1
		return "", "", false
	}
	value = s[i:ve]
	it.i = after(s, ve)
	if it.i >= 0 && s[it.i] != '"' {
		it.i = -1
	}
	return key, value, true
}

// after returns the offset of the value after the separator that follows offset e,
// or -1 when the container ends there.
func after(s string, e int) int {
	i := skipSpace(s, e)
	if i >= len(s) || s[i] != ',' {
		return -1
	}
	i = skipSpace(s, i+1)
	if i >= len(s) {
		return -1
	}
	return i
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
