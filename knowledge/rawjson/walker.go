package rawjson

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
// StringValue's is; one with escapes is checked and decoded from its start.
func readString(s string, i int) (string, int) {
	if j := plainEnd(s, i+1); j < len(s) && s[j] == '"' {
		return s[i+1 : j], j + 1
	}
	end := stringLiteralEnd(s, i)
	if end < 0 {
		return "", -1
	}
	return Unescape(s[i+1:end-1], -1), end
}

// Value checks the value starting at s[i] and returns the offset just past it,
// or -1.
func (w *Walker) Value(i int) int {
	s := w.s
	if w.failed || i >= len(s) {
		return w.fail()
	}
	end := valueEnd(s, i)
	if end < 0 {
		return w.fail()
	}
	// valueEnd finds the extent a valid value has; the value is valid when that
	// extent checks as a whole text nested within the levels left.
	left := w.maxDepth - w.depth
	if left < 1 && (s[i] == '{' || s[i] == '[') {
		return w.fail()
	}
	if scan(s[i:end], max(left, 1)).off >= 0 {
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
