package rawjson

import (
	"encoding/binary"
	"math/bits"
	"sync"
	"unicode/utf8"
)

// Walker walks a JSON text that has not been checked, as ScanMembers and
// ScanElements walk one that has, and checks it as it goes, so that a reader that
// walks all of a text reads it once instead of once to check it and again to walk
// it. A text is valid JSON nested at most maxDepth levels deep (Check's verdict)
// exactly when the walk of its root value succeeds and End accepts what follows.
//
// Each method returns -1 when the text is not valid where it reads; the walk has
// then failed (Failed) and every later call returns -1 too. The methods a
// callback uses to read a value count for its container, so the checks hold at
// any depth; a callback is only called with an offset inside the text. The
// walker recurses only as deep as its caller's callbacks do: a value they skip is
// checked by Check's iterative scanner.
type Walker struct {
	s        string
	maxDepth int
	depth    int // the containers open around the value being read
	failed   bool
}

// NewWalker returns a walker over s that refuses nesting deeper than maxDepth
// levels; maxDepth < 1 means DefaultMaxDepth, as for Check.
func NewWalker(s string, maxDepth int) Walker {
	if maxDepth < 1 {
		maxDepth = DefaultMaxDepth
	}
	return Walker{s: s, maxDepth: maxDepth}
}

// Failed reports that the walk met text that is not valid JSON, or nested too
// deeply.
func (w *Walker) Failed() bool { return w.failed }

func (w *Walker) fail() int {
	w.failed = true
	return -1
}

// Members walks the object starting at s[i] (after white space) as ScanMembers
// does: fn gets each member's key, checked and decoded (as Key decodes a raw
// key: without escapes it is a slice of the text), and the offset of its value,
// and returns the offset just past the value when it read the value with the
// walker's methods, or -1 to have the walker check and skip it. Members returns
// the offset just past the object, or -1.
func (w *Walker) Members(i int, fn func(key string, value int) int) int {
	s := w.s
	i = skipSpace(s, i)
	if w.failed || i >= len(s) || s[i] != '{' || !w.open() {
		return w.fail()
	}
	defer w.close()
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return w.fail()
		}
		key, ke := readString(s, i)
		if ke < 0 {
			return w.fail()
		}
		i = skipSpace(s, ke)
		if i >= len(s) || s[i] != ':' {
			return w.fail()
		}
		i = skipSpace(s, i+1)
		if i >= len(s) {
			return w.fail()
		}
		var done bool
		if i, done = w.next(i, fn(key, i), '}'); done || i < 0 {
			return i
		}
	}
}

// Elements walks the array starting at s[i] (after white space) as ScanElements
// does: fn gets each element's offset and returns the offset just past it, or -1
// to have the walker check and skip it. Elements returns the offset just past the
// array, or -1.
func (w *Walker) Elements(i int, fn func(value int) int) int {
	s := w.s
	i = skipSpace(s, i)
	if w.failed || i >= len(s) || s[i] != '[' || !w.open() {
		return w.fail()
	}
	defer w.close()
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return i + 1
	}
	for {
		if i >= len(s) {
			return w.fail()
		}
		var done bool
		if i, done = w.next(i, fn(i), ']'); done || i < 0 {
			return i
		}
	}
}

// next finishes a member or element whose value starts at i and, as fn said,
// ends at end (-1: not read). It returns the offset of the next value and false,
// or, with true, the offset just past the container when closing follows, or -1
// and false when the text is not valid.
func (w *Walker) next(i, end int, closing byte) (int, bool) {
	if w.failed {
		return -1, false
	}
	if end < 0 {
		end = w.Value(i)
	}
	if end < 0 {
		return -1, false
	}
	s := w.s
	i = skipSpace(s, end)
	switch {
	case i >= len(s):
		return w.fail(), false
	case s[i] == closing:
		return i + 1, true
	case s[i] == ',':
		return skipSpace(s, i+1), false
	}
	return w.fail(), false
}

// open enters a container, unless that nests it too deeply.
func (w *Walker) open() bool {
	if w.depth == w.maxDepth {
		return false
	}
	w.depth++
	return true
}

func (w *Walker) close() { w.depth-- }

// String reads the string starting at s[i]: it returns its value, decoded as
// StringValue decodes it, and the offset just past it, or "" and -1.
func (w *Walker) String(i int) (string, int) {
	s := w.s
	if w.failed || i >= len(s) || s[i] != '"' {
		return "", w.fail()
	}
	str, end := readString(s, i)
	if end < 0 {
		return "", w.fail()
	}
	return str, end
}

// readString reads the string whose quote is s[i]: it returns its value,
// decoded as StringValue decodes it, and the offset just past it, or "" and -1
// when the string is not valid. A string without escapes, as nearly all are, is
// checked and found in one read of its bytes and its value is a slice of s, as
// StringValue's is; one with escapes is checked and decoded in one read too
// (readEscaped), from its first escape on.
func readString(s string, i int) (string, int) {
	j := plainEnd(s, i+1)
	if j < len(s) && s[j] == '"' {
		return s[i+1 : j], j + 1
	}
	if j+1 >= len(s) || s[j] != '\\' {
		return "", -1 // the end of the text, or a control character
	}
	return readEscaped(s, i, j)
}

// readEscaped is readString for the string whose quote is s[start] and whose
// first byte that is not plain, a backslash, is s[i]: it checks the rest as
// stringLiteralEnd does and decodes it as Unescape does in the same read. As
// the value's length is known only at its end, it is decoded into a scratch
// buffer (decodeScratch) and copied out at its length: one allocation, of the
// value's size, as Unescape's.
func readEscaped(s string, start, i int) (string, int) {
	p := decodeScratch.Get().(*[]byte)
	buf, k, end := decodeEscaped(*p, s, start, i)
	var str string
	if end >= 0 {
		str = string(buf[:k])
	}
	if len(buf) <= maxScratch {
		*p = buf
		decodeScratch.Put(p)
	}
	return str, end
}

// decodeScratch holds readEscaped's buffers (*[]byte, used at their length).
var decodeScratch = sync.Pool{New: func() any {
	b := make([]byte, 4<<10)
	return &b
}}

// maxScratch is the largest buffer decodeScratch keeps: a longer string's is
// left to the collector.
const maxScratch = 64 << 10

// decodeEscaped is readEscaped's read: it decodes the string into buf (grown
// as it needs) and returns buf, the value's length in it and the offset just
// past the string, or -1.
func decodeEscaped(buf []byte, s string, start, i int) ([]byte, int, int) {
	n := len(s)
	if len(buf) < i-start+64 {
		buf = growDecoded(buf, 0, i-start+64)
	}
	k := copy(buf, s[start+1:i])
	for {
		if k+8 > len(buf) {
			buf = growDecoded(buf, k, 8)
		}
		i, k = decodeWords(buf, s, i, k)
		// s[i] is a byte decodeWords leaves: one near the end of s, a \u
		// escape or one that ends the string or makes it invalid; or buf is
		// nearly full.
		if i >= n {
			return buf, 0, -1
		}
		switch c := s[i]; {
		case plain[c]:
			if k == len(buf) {
				continue // to grow buf
			}
			buf[k] = c
			i, k = i+1, k+1
			continue
		case c == '"':
			return buf, k, i + 1
		case c != '\\' || i+1 >= n:
			return buf, 0, -1 // a control character, or the end of s
		}
		if k+utf8.UTFMax > len(buf) {
			buf = growDecoded(buf, k, utf8.UTFMax)
		}
		if b := shortEscape[s[i+1]]; b != 0 {
			buf[k] = b
			i, k = i+2, k+1
			continue
		}
		if s[i+1] != 'u' {
			return buf, 0, -1
		}
		// unicodeEscape checks the four hex digits as stringLiteralEnd does
		// (and the byte after them is read next).
		r, size := unicodeEscape(s, i)
		if size == 0 {
			return buf, 0, -1
		}
		k += utf8.EncodeRune(buf[k:], r)
		i += size
	}
}

// decodeWords is readEscaped's loop: from s[i], which it decodes into buf[k:],
// it copies eight bytes at a time up to the next byte that is not plain (an
// answer carrying a JSON claims block has an escape every few bytes) and
// decodes each two-character escape where it stands. It returns where it
// stopped in s and in buf: at a byte of another kind (the quote, a \u escape, a
// control character), or where fewer than eight bytes are left in s or in buf.
// It calls nothing, so that the loop keeps its offsets in registers.
func decodeWords(buf []byte, s string, i, k int) (int, int) {
	masks := wordMasks // see wordMasks
	// The loop's condition is written so that the compiler drops the bounds
	// checks of the eight-byte load and store.
	for 0 <= i && i < len(s)-7 && 0 <= k && k < len(buf)-7 {
		w := load8(s, i)
		binary.LittleEndian.PutUint64(buf[k:k+8], w)
		m := masks.special(w)
		if m == 0 {
			i, k = i+8, k+8
			continue
		}
		c := bits.TrailingZeros64(m) >> 3
		i, k = i+c, k+c // k < len(buf): c < 8
		if s[i] != '\\' || i+1 >= len(s) {
			break
		}
		b := shortEscape[s[i+1]]
		if b == 0 {
			break
		}
		buf[k] = b
		i, k = i+2, k+1
	}
	return i, k
}

// growDecoded returns buf, of which k bytes are decoded, grown to hold at least
// need more: doubled, or more when need asks for it.
func growDecoded(buf []byte, k, need int) []byte {
	grown := make([]byte, max(2*len(buf), k+need))
	copy(grown, buf[:k])
	return grown
}

// Value checks the value starting at s[i] and returns the offset just past it,
// or -1. A string, number or literal is read where it stands, as Check reads
// it (what follows it is its container's to check); a container is checked by
// Check's scanner.
func (w *Walker) Value(i int) int {
	s := w.s
	if w.failed || i >= len(s) {
		return w.fail()
	}
	var end int
	var f failure
	switch c := s[i]; c {
	case '{', '[':
		return w.container(i)
	case '"':
		if end = stringLiteralEnd(s, i); end < 0 {
			return w.fail()
		}
		return end
	case 't':
		end, f = scanLiteral(s, i, "true")
	case 'f':
		end, f = scanLiteral(s, i, "false")
	case 'n':
		end, f = scanLiteral(s, i, "null")
	default:
		if c != '-' && !isDigit(c) {
			return w.fail()
		}
		end, f = scanNumber(s, i)
	}
	if f.off >= 0 {
		return w.fail()
	}
	return end
}

// container checks the object or array starting at s[i] and returns the offset
// just past it, or -1.
func (w *Walker) container(i int) int {
	s := w.s
	end := valueEnd(s, i)
	if end < 0 {
		return w.fail()
	}
	// valueEnd finds the extent a valid value has; the value is valid when that
	// extent checks as a whole text nested within the levels left.
	left := w.maxDepth - w.depth
	if left < 1 || scan(s[i:end], left).off >= 0 {
		return w.fail()
	}
	return end
}

// End reports whether only white space follows offset i, the end of the root
// value, in a walk that has not failed.
func (w *Walker) End(i int) bool {
	if w.failed || i < 0 {
		return false
	}
	return skipSpace(w.s, i) == len(w.s)
}
