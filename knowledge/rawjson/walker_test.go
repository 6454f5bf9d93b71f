package rawjson

import (
	"math/rand/v2"
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
	// Scalars the walker checks where they stand, with what may follow them.
	`[1x]`, `{"a":12x}`, `[truex]`, `["a"x]`, `["a\"]`, `[-]`, `[1.]`, `{"a":nul}`, `[1e5,2E-3,-0.5,0,-0]`, `[1 2]`,
	`{"a":true"b"}`, `[false,null,true]`, `[01]`, `{"a":"\u00e9\n","b":-1e+9}`, "[\"a\x01\"]", `1x`, `-`, `"a"x`,
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

// readStringRef is what readString did before it checked and decoded a string
// with escapes in one read: stringLiteralEnd to check it, then Unescape.
func readStringRef(s string, i int) (string, int) {
	if j := plainEnd(s, i+1); j < len(s) && s[j] == '"' {
		return s[i+1 : j], j + 1
	}
	end := stringLiteralEnd(s, i)
	if end < 0 {
		return "", -1
	}
	return Unescape(s[i+1:end-1], -1), end
}

// checkReadString: readString reads every string literal in s (each quote taken
// as one's start) as stringLiteralEnd and Unescape do, and the walker's String
// reads the same.
func checkReadString(t *testing.T, s string) {
	t.Helper()
	for i := 0; i < len(s); i++ {
		if s[i] != '"' {
			continue
		}
		want, wantEnd := readStringRef(s, i)
		got, end := readString(s, i)
		if got != want || end != wantEnd {
			t.Fatalf("readString(%q, %d) = %q, %d; stringLiteralEnd and Unescape give %q, %d", s, i, got, end, want, wantEnd)
		}
		w := NewWalker(s, 0)
		if got, end = w.String(i); got != want || end != wantEnd || w.Failed() != (wantEnd < 0) {
			t.Fatalf("String(%q, %d) = %q, %d (failed %v); want %q, %d", s, i, got, end, w.Failed(), want, wantEnd)
		}
	}
}

// stringTails are what follows a string's pieces in TestReadStringAgreesWithTheTwoPasses:
// the end of the text, a closing quote with nothing or more text after it, and
// text without a quote long enough for the eight-byte step.
var stringTails = []string{"", `"`, `"]`, `","b":"c\n"}`, `"` + strings.Repeat("x", 40), "0123456789abcdef", `\`, "\x01"}

// TestReadStringAgreesWithTheTwoPasses: the one-read check and decode of a
// string with escapes gives what the check and then the decoder gave, for
// strings dense with escapes of every kind, cut anywhere, with any bytes after
// them.
func TestReadStringAgreesWithTheTwoPasses(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		var b strings.Builder
		b.WriteByte('"')
		for n := rng.IntN(16); n > 0; n-- {
			b.WriteString(unescapePieces[rng.IntN(len(unescapePieces))])
		}
		b.WriteString(stringTails[rng.IntN(len(stringTails))])
		s := b.String()
		for _, cut := range []int{len(s), rng.IntN(len(s) + 1)} {
			checkReadString(t, s[:cut])
		}
	}
	for _, s := range readStringSeeds {
		checkReadString(t, s)
	}
	// Strings longer than the scratch buffer a decode starts with, or keeps:
	// dense with escapes, or with a long plain run before the first.
	var valid []string
	for _, p := range unescapePieces {
		if _, end := readStringRef(`"`+p+`"`, 0); end > 0 {
			valid = append(valid, p)
		}
	}
	for _, size := range []int{4 << 10, 5 << 10, 70 << 10, 200 << 10} {
		var b strings.Builder
		b.WriteByte('"')
		for b.Len() < size {
			b.WriteString(valid[rng.IntN(len(valid))])
		}
		b.WriteString(`","x"`)
		checkLongString(t, b.String())
	}
	for _, n := range []int{4000, 4100, 70000} {
		checkLongString(t, `"`+strings.Repeat("p", n)+`\n\"`+strings.Repeat("q", n)+`"`)
	}
}

// checkLongString is checkReadString for the string at s[0] only.
func checkLongString(t *testing.T, s string) {
	t.Helper()
	want, wantEnd := readStringRef(s, 0)
	if got, end := readString(s, 0); got != want || end != wantEnd || end < 0 {
		t.Fatalf("readString of a %d-byte text: %d bytes to %d; stringLiteralEnd and Unescape give %d to %d", len(s), len(got), end, len(want), wantEnd)
	}
}

// A value readString decodes is its own: reading another string does not
// change it.
func TestReadStringValuesAreTheirOwn(t *testing.T) {
	t.Parallel()
	first, _ := readString(`"one\ttwo"`, 0)
	second, _ := readString(`"three\tfour"`, 0)
	if first != "one\ttwo" || second != "three\tfour" {
		t.Fatalf("read %q and %q", first, second)
	}
}

// readStringSeeds put a string's last escape or special byte at each place of an
// eight-byte word, at the end of the text and just before it.
var readStringSeeds = func() []string {
	seeds := []string{`"\n1234567\`, `"\n1234567\"`, `"\n123456\u00e9"`, `"\n12345\ud83d\ude00"`, `"\n1234567` + "\x01\"", `"\n1234567"`}
	for k := range 17 {
		pad := strings.Repeat("p", k)
		for _, end := range []string{`\`, `"`, `\"`, `\"x`, `\u00`, `\u00e9`, `\u00e9"`, `\ud83d\ude00"`, "\x1f\"", `\q"`, `é"`} {
			seeds = append(seeds, `"\t`+pad+end, `"\t`+pad+end+strings.Repeat(" ", 9))
		}
	}
	return seeds
}()

func FuzzReadString(f *testing.F) {
	for _, s := range readStringSeeds {
		f.Add(s)
	}
	for _, s := range unescapePieces {
		f.Add(`"` + s + s + "0123456789" + s + `"`)
	}
	f.Fuzz(func(t *testing.T, s string) { checkReadString(t, s) })
}
