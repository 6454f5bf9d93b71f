package rawjson

import (
	"strings"
	"testing"
)

// walkerRead says which values a test walk reads itself (the others the walker
// checks and skips): n counts the values met, so the choice varies along a text.
type walkerRead func(n int) bool

var walkerReads = map[string]walkerRead{
	"all":       func(int) bool { return true },
	"none":      func(int) bool { return false },
	"alternate": func(n int) bool { return n%2 == 0 },
	"every3rd":  func(n int) bool { return n%3 == 1 },
}

// walkText walks s with w, reading the values read picks; it returns whether the
// walk accepts s and what it read: each container's members (key and raw value) or
// elements (raw value), and each string read, in order.
func walkText(s string, maxDepth int, read walkerRead) (bool, []string) {
	w := NewWalker(s, maxDepth)
	var got []string
	n := 0
	var value func(i int) int
	value = func(i int) int {
		n++
		if !read(n) {
			return -1
		}
		switch s[i] {
		case '{':
			return w.Members(i, func(key string, v int) int {
				end := value(v)
				if end >= 0 && !w.Failed() {
					got = append(got, "member "+key+" "+s[v:end])
				}
				return end
			})
		case '[':
			return w.Elements(i, func(v int) int {
				end := value(v)
				if end >= 0 && !w.Failed() {
					got = append(got, "element "+s[v:end])
				}
				return end
			})
		case '"':
			str, end := w.String(i)
			if end >= 0 {
				got = append(got, "string "+str)
			}
			return end
		}
		return -1
	}
	root := skipSpace(s, 0)
	if root >= len(s) {
		return w.End(w.Value(root)), nil
	}
	end := value(root)
	if end < 0 && !w.Failed() {
		end = w.Value(root)
	}
	return w.End(end), got
}

// scanText collects what walkText reads from a valid text with the walk that
// does not check (ScanMembers, ScanElements, StringValue).
func scanText(s string, read walkerRead) []string {
	var got []string
	n := 0
	var value func(i int) int
	value = func(i int) int {
		n++
		if !read(n) {
			return -1
		}
		switch s[i] {
		case '{':
			return ScanMembers(s, i, func(key string, v int) int {
				end := value(v)
				if end < 0 {
					end = ValueEnd(s, v)
				} else {
					got = append(got, "member "+Key(key)+" "+s[v:end])
				}
				return end
			})
		case '[':
			return ScanElements(s, i, func(v int) int {
				end := value(v)
				if end < 0 {
					end = ValueEnd(s, v)
				} else {
					got = append(got, "element "+s[v:end])
				}
				return end
			})
		case '"':
			end := ValueEnd(s, i)
			str, _ := StringValue(s[i:end])
			got = append(got, "string "+str)
			return end
		}
		return -1
	}
	value(skipSpace(s, 0))
	return got
}

// checkWalkerAsCheck: whatever the walk reads, it accepts s exactly when Check
// does, and on valid text it reads what the unchecked walk reads.
func checkWalkerAsCheck(t *testing.T, s string, maxDepth int) {
	t.Helper()
	valid := ValidString(s, maxDepth)
	for name, read := range walkerReads {
		ok, got := walkText(s, maxDepth, read)
		if ok != valid {
			t.Fatalf("%q (bound %d), reading %s: walker %v, Check %v", s, maxDepth, name, ok, valid)
		}
		if !valid {
			continue
		}
		if want := scanText(s, read); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%q, reading %s: walker read\n%q\nthe unchecked walk\n%q", s, name, got, want)
		}
	}
}

var walkerSeeds = []string{
	`{"a":[1,{"b":"c\u00e9"},"\ud83d\ude00",[[],{}]],"d":{"e":null},"f":true,"g":-1.5e3}`,
	` [ "x" , { "y" : [ "z" ] } , 0 ] `, `{"a":"b",}`, `{"a":"b" "c":1}`, `["a",]`, `["a" "b"]`,
	`{"a\u0000":1}`, "{\"a\x01\":1}", "[\"\x1f\"]", `["\x"]`, `[[[[1]]]]`, `{"a":{"b":{"c":{}}}}`,
	`[{"a":tru}]`, `[01]`, `[1 ]x`, `{"a":1}}`, `[1]]`, `[`, `{"a"`, `{"a":`, `"`, `[""`,
	`{"a":[1,2,{"b":[3,{"c":"d"}]}],"e":"f"}`,
}

func TestWalkerAgreesWithCheck(t *testing.T) {
	t.Parallel()
	for _, s := range append(append([]string{}, checkSeeds...), walkerSeeds...) {
		for _, depth := range []int{0, 1, 2, 3, 4, 1000} {
			checkWalkerAsCheck(t, s, depth)
		}
	}
}

func FuzzWalkerAgreesWithCheck(f *testing.F) {
	for _, s := range append(append([]string{}, checkSeeds...), walkerSeeds...) {
		f.Add(s, 0)
		f.Add(s, 2)
	}
	f.Add(strings.Repeat("[", 200), 3)
	f.Fuzz(func(t *testing.T, s string, maxDepth int) {
		checkWalkerAsCheck(t, s, maxDepth%300)
	})
}

// A failed walk stays failed, and its callbacks' offsets past the failure are
// not trusted.
func TestWalkerStaysFailed(t *testing.T) {
	t.Parallel()
	w := NewWalker(`[1,x]`, 0)
	if end := w.Elements(0, func(int) int { return -1 }); end != -1 || !w.Failed() {
		t.Fatalf("Elements = %d, failed %v", end, w.Failed())
	}
	if _, end := w.String(0); end != -1 {
		t.Fatalf("String after a failure = %d", end)
	}
	if w.Value(1) != -1 || w.End(5) {
		t.Fatal("Value or End after a failure")
	}
}
