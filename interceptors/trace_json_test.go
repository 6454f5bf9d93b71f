package interceptors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/factgate/factgate/configs/units"
)

// plainTrace is Trace without its methods: json.Marshal of it is the reference
// encoding, what MarshalJSON produced before the trace wrote itself.
type plainTrace Trace

// referenceJSON encodes tr with encoding/json, under its lock.
func referenceJSON(tr *Trace) ([]byte, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return json.Marshal((*plainTrace)(tr))
}

// TestTraceJSONMatchesEncodingJSON compares AppendJSON with encoding/json on
// thousands of random traces. The filler sets every exported field of Trace and
// of every type under it by reflection, so a field added to any of them later is
// filled here too, and this test fails until appendJSON writes it.
func TestTraceJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(20240601, 7))
	for i := range 5000 {
		f := traceFiller{rng: rng, full: i%10 == 0}
		tr := f.trace()
		if !compareTraceJSON(t, tr) {
			t.Fatalf("iteration %d", i)
		}
	}
}

// TestTraceJSONEdgeCases covers values the filler meets only by chance.
func TestTraceJSONEdgeCases(t *testing.T) {
	t.Parallel()
	for name, tr := range map[string]*Trace{
		"zero":                          {},
		"now, with a monotonic reading": {ID: "x", Started: time.Now()},
		"empty non-omitempty slices": {
			Attempts: []Attempt{{Issues: []Issue{}}},
			Notice:   &Notice{Issues: []NoticeIssue{}},
			Request:  &TraceRequest{Messages: []TraceMessage{}},
		},
		"nil non-omitempty slices": {
			Attempts: []Attempt{{}},
			Notice:   &Notice{},
			Request:  &TraceRequest{},
		},
		"empty omitempty slices and maps": {
			Scopes: map[string][]string{}, Attempts: []Attempt{}, Calls: []Call{},
			UpstreamAttempts: []UpstreamAttempt{}, Choices: []FinalOutcome{},
			Downgrades: []Downgrade{}, Timings: map[string]units.Millis{}, Notes: []string{},
		},
		"nil and empty scope lists": {Scopes: map[string][]string{"b": nil, "a": {}, "": {""}}},
		"severities out of range": {Attempts: []Attempt{{Issues: []Issue{
			{Severity: -1}, {Severity: Fatal + 1}, {Severity: math.MinInt}, {Severity: math.MaxInt},
		}}}},
		"keys that escape alike": {Timings: map[string]units.Millis{"\xff": 1, "\xfe": 2, "<": 3, "\u2028": 4}},
		"extreme durations": {Timings: map[string]units.Millis{
			"max": math.MaxInt64, "min": math.MinInt64, "ns": 1, "-ns": -1, "µs": 1000, "odd": 1234567,
		}},
		"year 0":                         {Started: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)},
		"year 9999 east of UTC":          {Started: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", 23*3600+59*60))},
		"year -1":                        {Started: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		"year 10000":                     {Started: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"an offset of 24 hours":          {Started: time.Date(2024, 5, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))},
		"an offset of seconds":           {Started: time.Date(2024, 5, 1, 0, 0, 0, 10, time.FixedZone("LMT", -(4*3600+56*60+2)))},
		"the zero time in a named zone":  {Started: time.Time{}.In(time.FixedZone("X", 3600))},
		"html and separators everywhere": {ID: "<&>", Notes: []string{"\u2028\u2029", "\x7f\x00"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			compareTraceJSON(t, tr)
		})
	}
}

// compareTraceJSON reports whether AppendJSON and MarshalJSON agree with
// encoding/json on tr, byte for byte and error for error, and whether the output is
// valid JSON that json.Marshal passes through as it is.
func compareTraceJSON(t testing.TB, tr *Trace) bool {
	t.Helper()
	want, wantErr := referenceJSON(tr)
	prefix := []byte(`prefix`)
	got, gotErr := tr.AppendJSON(prefix)
	marshalled, marshalErr := tr.MarshalJSON()
	if wantErr != nil || gotErr != nil || marshalErr != nil {
		if wantErr == nil || gotErr == nil || marshalErr == nil ||
			gotErr.Error() != wantErr.Error() || marshalErr.Error() != wantErr.Error() {
			t.Errorf("errors differ:\nencoding/json: %v\nAppendJSON:    %v\nMarshalJSON:   %v", wantErr, gotErr, marshalErr)
			return false
		}
		if string(got) != "prefix" || marshalled != nil {
			t.Errorf("on error AppendJSON returned %q (want its dst), MarshalJSON %q (want nil)", got, marshalled)
			return false
		}
		return true
	}
	if !bytes.HasPrefix(got, prefix) {
		t.Errorf("AppendJSON did not keep dst: %q", got[:min(len(got), 20)])
		return false
	}
	got = got[len(prefix):]
	if !bytes.Equal(got, want) {
		t.Errorf("AppendJSON differs from encoding/json: %s", firstDifference(got, want))
		return false
	}
	if !bytes.Equal(marshalled, want) {
		t.Errorf("MarshalJSON differs from encoding/json: %s", firstDifference(marshalled, want))
		return false
	}
	if !json.Valid(got) {
		t.Errorf("AppendJSON's output is not valid JSON: %q", got)
		return false
	}
	// Through json.Marshal, the output is checked and compacted: it must not change.
	viaMarshaler, err := json.Marshal(tr)
	if err != nil || !bytes.Equal(viaMarshaler, want) {
		t.Errorf("json.Marshal(trace) = %v, %s", err, firstDifference(viaMarshaler, want))
		return false
	}
	return true
}

// firstDifference locates the first byte where got and want differ, with some
// context on either side.
func firstDifference(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(i-60, 0)
	return fmt.Sprintf("first difference at byte %d (lengths %d and %d)\n got: …%q\nwant: …%q",
		i, len(got), len(want), got[from:min(i+40, len(got))], want[from:min(i+40, len(want))])
}

// TestTraceJSONRoundTrip: AppendJSON's output decodes into a Trace that encodes
// to the same bytes, for traces whose values JSON carries exactly (valid UTF-8,
// known severities, whole milliseconds).
func TestTraceJSONRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(99, 1))
	for i := range 1000 {
		f := traceFiller{rng: rng, exact: true, full: i%10 == 0}
		tr := f.trace()
		b, err := tr.AppendJSON(nil)
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		var back Trace
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("iteration %d: decoding %s: %v", i, b, err)
		}
		again, err := back.AppendJSON(nil)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("iteration %d: the decoded trace encodes differently (%v): %s", i, err, firstDifference(again, b))
		}
	}
}

// TestTraceJSONWritesEveryField fills every field of every type under Trace with
// a non-zero value, and checks that each appears in the output under its JSON
// name, and that the output has no member the types do not name. A field the
// encoder does not know fails here by name.
func TestTraceJSONWritesEveryField(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	c := memberCheck{seen: map[string]bool{}, reported: map[string]bool{}}
	for range 20 {
		f := traceFiller{rng: rng, full: true, exact: true}
		b, err := f.trace().AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		c.members(reflect.TypeFor[Trace](), doc, "trace")
	}
	for _, problem := range c.problems {
		t.Error(problem)
	}
	for _, typ := range structTypesUnder(reflect.TypeFor[Trace]()) {
		for _, field := range reflect.VisibleFields(typ) {
			if name, ok := jsonName(field); ok && !c.seen[typ.Name()+"."+name] && !c.reported[typ.Name()+"."+name] {
				t.Errorf("%s.%s (%q) was never checked", typ.Name(), field.Name, name)
			}
		}
	}
}

// memberCheck walks decoded documents along the Go types they encode, noting the
// fields found under their JSON names and each problem once.
type memberCheck struct {
	seen     map[string]bool // "Type.name" found
	reported map[string]bool // "Type.name" missing or unknown, reported
	problems []string
}

func (c *memberCheck) members(typ reflect.Type, v any, path string) {
	if typ == timeType || v == nil {
		return
	}
	switch typ.Kind() {
	case reflect.Pointer:
		c.members(typ.Elem(), v, path)
	case reflect.Slice:
		items, _ := v.([]any)
		for i, item := range items {
			c.members(typ.Elem(), item, fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		members, _ := v.(map[string]any)
		for k, item := range members {
			c.members(typ.Elem(), item, path+"."+k)
		}
	case reflect.Struct:
		c.structMembers(typ, v, path)
	}
}

func (c *memberCheck) structMembers(typ reflect.Type, v any, path string) {
	members, ok := v.(map[string]any)
	if !ok {
		c.report(typ.Name(), fmt.Sprintf("%s: a %s written as %T, not an object", path, typ.Name(), v))
		return
	}
	known := map[string]bool{}
	for _, field := range reflect.VisibleFields(typ) {
		name, ok := jsonName(field)
		if !ok {
			continue
		}
		known[name] = true
		item, present := members[name]
		if !present {
			c.report(typ.Name()+"."+name, fmt.Sprintf("%s: %s.%s, set to a non-zero value, is missing (%q)", path, typ.Name(), field.Name, name))
			continue
		}
		c.seen[typ.Name()+"."+name] = true
		c.members(field.Type, item, path+"."+name)
	}
	for name := range members {
		if !known[name] {
			c.report(typ.Name()+"."+name, fmt.Sprintf("%s: a %s has a member %q that none of its fields names", path, typ.Name(), name))
		}
	}
}

// report notes a problem the first time its key is met.
func (c *memberCheck) report(key, problem string) {
	if !c.reported[key] {
		c.reported[key] = true
		c.problems = append(c.problems, problem)
	}
}

// jsonName returns the name encoding/json gives an exported field, and false for
// a field it skips.
func jsonName(field reflect.StructField) (string, bool) {
	if !field.IsExported() {
		return "", false
	}
	name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
	switch name {
	case "-":
		return "", false
	case "":
		return field.Name, true
	}
	return name, true
}

// structTypesUnder lists the struct types reachable from typ through fields,
// pointers, slices and maps (time.Time aside), typ first.
func structTypesUnder(typ reflect.Type) []reflect.Type {
	var found []reflect.Type
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			walk(typ.Elem())
			return
		case reflect.Struct:
		default:
			return
		}
		if typ == timeType || typ.PkgPath() == "sync" {
			return
		}
		for _, seen := range found {
			if seen == typ {
				return
			}
		}
		found = append(found, typ)
		for _, field := range reflect.VisibleFields(typ) {
			if field.IsExported() {
				walk(field.Type)
			}
		}
	}
	walk(typ)
	return found
}

// FuzzTraceJSON compares AppendJSON with encoding/json on traces built from
// fuzzed strings and integers: in the fields the fuzzer sets directly, and among
// the filler's values for every other field.
func FuzzTraceJSON(f *testing.F) {
	f.Add("id", "答案 <b>&</b>", "\xff\u2028\"\\", int64(1_500_000), int64(-3), uint64(1))
	f.Add("", "", "", int64(0), int64(0), uint64(0))
	f.Add("\x00\b\f\x7f", "😀", "e-09", int64(math.MaxInt64), int64(math.MinInt64), uint64(42))
	f.Add("a", "b", "c", int64(253402300800), int64(999_999_999), uint64(7))
	f.Add("主基地迁移的证据\u2028来自打包与展开", "{\n  \"unitId\": 246,\n  \"claim\": \"<a>&\"\n}", "\xe2\x80\xa9\xed\xa0\x80\xe0\x9f\xbf\xf4\x90\x80\x80", int64(1247579), int64(91043), uint64(3))
	f.Fuzz(func(t *testing.T, a, b, c string, n, m int64, seed uint64) {
		fl := traceFiller{
			rng:        rand.New(rand.NewPCG(seed, uint64(n))),
			extraTexts: []string{a, b, c},
			extraInts:  []int64{n, m},
		}
		tr := fl.trace()
		tr.ID = a
		tr.Started = time.Unix(n%(1<<40), m).In(time.FixedZone(c, int(m%(26*3600))))
		tr.Scopes = map[string][]string{a: {b, c}, b: nil, c: {}}
		tr.Timings = map[string]units.Millis{a: units.Millis(n), b: units.Millis(m)}
		tr.Attempts = append(tr.Attempts, Attempt{
			Kind:     b,
			Content:  a + b + c,
			Duration: units.Millis(m),
			Issues: []Issue{{
				Severity: Severity(m),
				Args:     map[string]string{c: a, a: c},
				Facts:    []FactLine{{At: time.Duration(n), Text: b}},
			}},
		})
		compareTraceJSON(t, tr)
	})
}

// TestAppendJSONString compares appendString with encoding/json on every byte,
// every pair of bytes and random strings, with and without text after them and
// behind and between long CJK text; single bytes and random strings at every
// offset from the eight-byte words appendString reads (behind 0 to 8 ASCII
// bytes), pairs at one offset each, in turn.
func TestAppendJSONString(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("文", 22)
	check := func(s string, offsets ...int) {
		t.Helper()
		checkAppendString(t, s, s+"abcdefgh", long+s, s+long+s)
		for _, k := range offsets {
			checkAppendString(t, "01234567"[:k]+s, "01234567"[:k]+s+"x", "01234567"[:k]+s+"文文文")
		}
	}
	every := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	check("\u2028 \u2029 \u2027 \u202a \u2128 <&> \"\\ \x00\x1f\x7f \xe2\x80\xa8\xe2\x80", every...)
	for i := range 1 << 16 {
		if i < 256 {
			check(string([]byte{byte(i)}), every...)
		}
		check(string([]byte{byte(i >> 8), byte(i)}), i%9)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		check(randomText(rng, false), every...)
	}
	for r := rune(0); r <= utf8.MaxRune+1; r += 1 + rune(rng.IntN(64)) {
		check("a"+string(r)+"\xe2\x80", rng.IntN(9))
	}
}

// TestAppendJSONStringBlocks writes strings of several of appendString's blocks
// with each kind of character across the end of a block, at every offset from
// it, behind text that escapes at its longest (\u00XX for each byte) or not at
// all: appendRun must find room for the longest escapes of a whole block, and a
// character it leaves at a block's end must come out whole.
func TestAppendJSONStringBlocks(t *testing.T) {
	t.Parallel()
	probes := []string{"\x01\"<>&\\", "中", "é", "😀", "\u2028", "\xed\xa0\x80", "\xe2\x80", "\xff", "\xf0\x9f\x98"}
	fills := []string{"a", "\x01", "\"", "中", "😀"}
	for _, fill := range fills {
		for _, probe := range probes {
			for d := range 2*len(probe) + 16 {
				lead := strings.Repeat(fill, (stringBlock-d+len(fill)-1)/len(fill))
				for _, s := range []string{
					lead + probe,
					lead + probe + lead + probe + lead,
					strings.Repeat(lead+probe, 3) + "x",
				} {
					checkAppendString(t, s, s[1:], "\x01"+s)
				}
			}
		}
	}
	// Long runs of one kind over many blocks: every byte escaped, characters of
	// two, three and four bytes.
	for _, run := range []string{"\x01\x1f<>&\"\\", "é", "中", "😀", "\u2028"} {
		checkAppendString(t, strings.Repeat(run, 8*stringBlock))
	}
}

// TestAppendJSONStringKeepsRoom: appendString writes in b's spare capacity
// without growing it when that holds the encoding and sixteen bytes more, as
// SetChoiceContent sizes its body for an answer: a string's blocks take the
// room there is, and do not ask for room for every byte escaped at its longest.
func TestAppendJSONStringKeepsRoom(t *testing.T) {
	t.Parallel()
	answer, err := os.ReadFile(benchAnswerPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{string(answer), strings.Repeat("中", 300), strings.Repeat("a", 1000), strings.Repeat("\"\n", 400), "<&>"} {
		want, _ := json.Marshal(s)
		for spare := 16; spare < 40; spare++ {
			b := append(make([]byte, 0, 1+len(want)+spare), '<')
			got := appendString(b, s)
			if !bytes.Equal(got[1:], want) {
				t.Fatalf("appendString(%.40q): %s", s, firstDifference(got[1:], want))
			}
			if &got[0] != &b[:1][0] {
				t.Errorf("appendString(%.40q) grew a buffer with room for its %d bytes and %d more", s, len(want), spare)
			}
		}
	}
}

// TestUTF8Size compares utf8Size with utf8.DecodeRuneInString on every sequence
// of one to four bytes that starts with a byte of 0x80 or above and goes on with
// bytes at the edges of the ranges that decide a sequence: every valid and
// invalid form, cut short or not.
func TestUTF8Size(t *testing.T) {
	t.Parallel()
	for c := 0x80; c <= 0xff; c++ {
		for _, c1 := range utf8Edges {
			for _, c2 := range utf8Edges {
				for _, c3 := range utf8Edges {
					seq := string([]byte{byte(c), c1, c2, c3})
					for n := 1; n <= 4; n++ {
						want := 0
						if r, size := utf8.DecodeRuneInString(seq[:n]); r != utf8.RuneError || size > 1 {
							want = size
						}
						if got := utf8Size(seq[:n], 0); got != want {
							t.Fatalf("utf8Size(%q) = %d, want %d", seq[:n], got, want)
						}
					}
				}
			}
		}
	}
}

// utf8Edges are the bytes that decide a UTF-8 sequence: the edges of every range
// of lead and continuation bytes, and some ASCII.
var utf8Edges = []byte{0x00, 0x22, 0x3c, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xa8, 0xa9, 0xbf,
	0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xe2, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff}

// TestAppendJSONStringAlignments writes every byte from 0x80 on, followed by
// each byte that decides a sequence, and the line and paragraph separators next
// to every byte, at every offset from appendString's eight-byte words.
func TestAppendJSONStringAlignments(t *testing.T) {
	t.Parallel()
	for c := 0x80; c <= 0xff; c++ {
		for _, c1 := range utf8Edges {
			checkAlignments(t, string([]byte{byte(c), c1, 0xbf, 0x80}))
			checkAlignments(t, string([]byte{byte(c), c1, 'a'}))
		}
	}
	for c := range 256 {
		for _, sep := range []string{"\u2028", "\u2029"} {
			checkAlignments(t, sep+string(byte(c)))
			checkAlignments(t, string(byte(c))+sep)
			checkAlignments(t, sep+sep+string(byte(c))+"中"+sep)
		}
	}
}

// checkAlignments checks s behind 0 to 8 bytes of ASCII, of CJK and of escapes,
// with text of each kind after it, so that every byte of s falls at every
// position of an eight-byte word and the string ends at every one.
func checkAlignments(t *testing.T, s string) {
	t.Helper()
	for k := range 9 {
		for _, pad := range []string{"abcdefgh"[:k], strings.Repeat("中", k)[:k], strings.Repeat("\n", k)} {
			checkAppendString(t, pad+s, pad+s+pad, s+pad, pad+s+"文字")
		}
	}
}

// checkAppendString compares appendString with json.Marshal on each string,
// appended behind a prefix into a buffer with no room to spare and into one with
// room, and checks the prefix is kept.
func checkAppendString(t *testing.T, strs ...string) {
	t.Helper()
	for _, s := range strs {
		want, _ := json.Marshal(s)
		got := appendString([]byte("<"), s)
		if got[0] != '<' || !bytes.Equal(got[1:], want) {
			t.Fatalf("appendString(%q): %s", s, firstDifference(got[1:], want))
		}
		roomy := append(make([]byte, 0, len(want)+64), '<')
		if got := appendString(roomy, s); got[0] != '<' || !bytes.Equal(got[1:], want) {
			t.Fatalf("appendString(%q) with room: %s", s, firstDifference(got[1:], want))
		}
	}
}

// TestAppendFloat64 compares appendFloat64 and appendMillis with encoding/json,
// the exponent form included (which a duration never needs).
func TestAppendFloat64(t *testing.T) {
	t.Parallel()
	check := func(f float64) {
		t.Helper()
		want, _ := json.Marshal(f)
		if got := appendFloat64(nil, f); !bytes.Equal(got, want) {
			t.Fatalf("appendFloat64(%v) = %s, want %s", f, got, want)
		}
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 1e-6, 1e-7, 9.99e-7, 1e20, 1e21, 1.5e21, 5e-324,
		math.MaxFloat64, -math.MaxFloat64, 123456789.123, 1e-9, 1e-10, 1e-100} {
		check(f)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	for range 100000 {
		if f := math.Float64frombits(rng.Uint64()); !math.IsNaN(f) && !math.IsInf(f, 0) {
			check(f)
		}
	}
	checkMillis := func(d units.Millis) {
		t.Helper()
		want, _ := json.Marshal(d)
		if got := appendMillis(nil, d); !bytes.Equal(got, want) {
			t.Fatalf("appendMillis(%d) = %s, want %s", d, got, want)
		}
	}
	// Around the bound below which appendMillis writes the integer, and values
	// with every number of trailing zeros.
	for _, d := range []int64{0, 1, 10, 999_999, 1_000_000, 1_000_001, 1_100_000, 120_000_000, 1e15 - 1, 1e15, 1e15 + 1,
		999_999_999_999_999, 123_456_789_012_345, 100_000_000_000_001, 1 << 50, 1<<53 - 1, 1 << 53, 1<<53 + 1} {
		checkMillis(units.Millis(d))
		checkMillis(units.Millis(-d))
	}
	for range 100000 {
		d := units.Millis(rng.Int64() >> rng.IntN(64))
		if rng.IntN(2) == 0 {
			d = -d
		}
		checkMillis(d)
		checkMillis(d / 1000 * 1000) // whole microseconds
	}
}

// TestTraceJSONMarshalRoom: a cache keeps MarshalJSON's result as it is, so its
// room must be its length, give or take the allocator's size class. What
// AppendJSON and MarshalJSON allocate is reported by BenchmarkTraceJSON.
func TestTraceJSONMarshalRoom(t *testing.T) {
	tr := benchmarkTrace()
	if out, _ := tr.MarshalJSON(); cap(out)-len(out) > len(out)/8 {
		t.Errorf("MarshalJSON returned %d bytes with room for %d", len(out), cap(out))
	}
}

// TestTraceJSONConcurrent encodes a trace from several goroutines while others
// edit it: each encoding is whole (valid JSON), and with -race the scratch
// buffers are never shared.
func TestTraceJSONConcurrent(t *testing.T) {
	t.Parallel()
	tr := benchmarkTrace()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				tr.Note(fmt.Sprintf("note %d of %d", i, g))
				tr.Time("step", time.Microsecond)
				tr.AddUpstreamAttempt(UpstreamAttempt{Upstream: "u", Outcome: "ok"})
			}
		})
		wg.Go(func() {
			var buf []byte
			for range 200 {
				out, err := tr.MarshalJSON()
				if err != nil || !json.Valid(out) {
					t.Errorf("MarshalJSON: %v, %.80q", err, out)
					return
				}
				if buf, err = tr.AppendJSON(buf[:0]); err != nil || !json.Valid(buf) {
					t.Errorf("AppendJSON: %v, %.80q", err, buf)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkTraceJSON encodes a realistic trace — a draft of 4 KB with issues, the
// client's two messages of 2 KB, an upstream try, timings — with encoding/json
// (what MarshalJSON did before), with AppendJSON into a reused buffer, and with
// MarshalJSON.
func BenchmarkTraceJSON(b *testing.B) {
	tr := benchmarkTrace()
	want, err := referenceJSON(tr)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(want)))
		for b.Loop() {
			if _, err := referenceJSON(tr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(want)))
		var buf []byte
		for b.Loop() {
			if buf, err = tr.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(want)))
		for b.Loop() {
			if _, err := tr.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchTracePath is the trace of factgate bench's validating request: an
// accepted draft of ~3 KB of CJK prose around a claims block in JSON, notes,
// timings and usage.
const benchTracePath = "testdata/bench_trace.json"

// loadBenchTrace decodes the bench's trace; it encodes back to the same bytes.
func loadBenchTrace(tb testing.TB) (*Trace, []byte) {
	tb.Helper()
	raw, err := os.ReadFile(benchTracePath)
	if err != nil {
		tb.Fatal(err)
	}
	raw = bytes.TrimSpace(raw)
	tr := new(Trace)
	if err := json.Unmarshal(raw, tr); err != nil {
		tb.Fatal(err)
	}
	return tr, raw
}

// BenchmarkTraceJSONBench encodes the bench's trace as SaveTrace does
// (MarshalJSON), and with AppendJSON into a reused buffer.
func BenchmarkTraceJSONBench(b *testing.B) {
	tr, raw := loadBenchTrace(b)
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		var buf []byte
		var err error
		for b.Loop() {
			if buf, err = tr.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := tr.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchmarkTrace is a trace as a validated chat request leaves it.
func benchmarkTrace() *Trace {
	paragraph := "第 3 分钟，\"Zerg\" 玩家在主基地外建造了第二个孵化场（hatchery），" +
		"同时侦察到对手的 Stalker <x2> & Sentry。The \"Protoss\" player opened with a gateway expand.\n"
	content := strings.Repeat(paragraph, 4096/len(paragraph)+1)
	message := strings.Repeat("Analyse this replay: who won the early game, and why?\n\"map\": Alcyone LE\n", 2048/72+1)
	issue := func(code string, severity Severity) Issue {
		return Issue{
			Code: code, Severity: severity, Path: "unitClaims[2]",
			Message:        "the facts do not show a Stalker before 3:00",
			Recommendation: Recommendation{EvidenceLevel: "possible", Alternatives: []string{"Adept"}, Text: "改为“可能”"},
			Facts:          []FactLine{{At: 172 * time.Second, Text: "02:52 Protoss Gateway complete"}},
			Validator:      "facts/units",
			Args:           map[string]string{"unit": "Stalker", "player": "Protoss"},
		}
	}
	return &Trace{
		ID:           "5f2b9c0e7d1a4c3b8e6f0a9d2c4b7e1f",
		Route:        "chat",
		Started:      time.Date(2025, 3, 14, 9, 26, 53, 589793238, time.UTC),
		Owner:        "key:team-a",
		KnowledgeSet: "sc2",
		Scopes:       map[string][]string{"factions": {"protoss", "zerg"}, "map": {"Alcyone LE"}},
		FactKey:      "facts:9a0c4e8f2b7d1c6e5a3f",
		Attempts: []Attempt{{
			Kind: KindDraft, Issues: []Issue{issue("evidence.not_in_replay", Contradiction), issue("unit.not_observed", Warning)},
			Counts: "C1,W1", RequestBytes: 18234, Duration: units.Millis(2345678901),
			Usage: Usage{PromptTokens: 4312, CompletionTokens: 1201, TotalTokens: 5513}, Content: content,
		}},
		Upstream: "openai",
		UpstreamAttempts: []UpstreamAttempt{{
			Upstream: "openai", Key: "OPENAI_API_KEY", Status: 200, Outcome: "ok", Duration: units.Millis(2345678901),
		}},
		Final: &FinalOutcome{Outcome: OutcomeDowngraded, Counts: "C1,W1", Delivered: "W1"},
		Timings: map[string]units.Millis{
			"facts": units.Millis(12345678), "upstream": units.Millis(2345678901),
			"validate": units.Millis(3456789), "total": units.Millis(2361481368),
		},
		Usage:     Usage{PromptTokens: 4312, CompletionTokens: 1201, TotalTokens: 5513},
		ClientKey: "team-a",
		Request: &TraceRequest{Model: "gpt-4o", Messages: []TraceMessage{
			{Role: "system", Content: message, Bytes: len(message)},
			{Role: "user", Content: message, Bytes: len(message)},
		}},
	}
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	severityType = reflect.TypeFor[Severity]()
	durationType = reflect.TypeFor[time.Duration]()
	millisType   = reflect.TypeFor[units.Millis]()
)

// traceFiller builds random traces by reflection: every exported field of every
// struct under Trace gets a value, so a field added later is filled without a
// change here.
type traceFiller struct {
	rng *rand.Rand
	// full makes every value non-zero: no nil, empty, zero or false, so that
	// every member is written.
	full bool
	// exact keeps to values a JSON round trip carries exactly: valid UTF-8,
	// known severities, whole milliseconds, times RFC 3339 can write.
	exact bool
	// extraTexts and extraInts are drawn from as often as the filler's own.
	extraTexts []string
	extraInts  []int64
}

// trace returns a new random trace.
func (f *traceFiller) trace() *Trace {
	tr := new(Trace)
	f.fill(reflect.ValueOf(tr).Elem())
	return tr
}

func (f *traceFiller) fill(v reflect.Value) {
	switch v.Type() {
	case timeType:
		v.Set(reflect.ValueOf(f.time()))
		return
	case severityType:
		v.SetInt(f.severity())
		return
	case durationType, millisType:
		v.SetInt(f.duration())
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.text())
	case reflect.Bool:
		v.SetBool(f.full || f.rng.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(f.integer())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.integer()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.integer()) / 1000)
	case reflect.Pointer:
		f.fillPointer(v)
	case reflect.Slice:
		f.fillSlice(v)
	case reflect.Map:
		f.fillMap(v)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	default:
		panic(fmt.Sprintf("traceFiller: no values for %s; teach it, and AppendJSON, this kind", v.Type()))
	}
}

func (f *traceFiller) fillPointer(v reflect.Value) {
	if !f.full && f.rng.IntN(3) == 0 {
		v.SetZero()
		return
	}
	p := reflect.New(v.Type().Elem())
	f.fill(p.Elem())
	v.Set(p)
}

func (f *traceFiller) fillSlice(v reflect.Value) {
	n := f.length()
	if n < 0 {
		v.SetZero()
		return
	}
	s := reflect.MakeSlice(v.Type(), n, n)
	for i := range n {
		f.fill(s.Index(i))
	}
	v.Set(s)
}

func (f *traceFiller) fillMap(v reflect.Value) {
	n := f.length()
	if n < 0 {
		v.SetZero()
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), n)
	for range n {
		k := reflect.New(v.Type().Key()).Elem()
		f.fill(k)
		e := reflect.New(v.Type().Elem()).Elem()
		f.fill(e)
		m.SetMapIndex(k, e)
	}
	v.Set(m)
}

// length returns a slice's or map's length, -1 for nil: nil, empty and short
// alike, never nil or empty when full.
func (f *traceFiller) length() int {
	if f.full {
		return 1 + f.rng.IntN(3)
	}
	switch f.rng.IntN(5) {
	case 0:
		return -1
	case 1:
		return 0
	}
	return 1 + f.rng.IntN(3)
}

// traceTexts are strings every escape of encoding/json meets.
var traceTexts = []string{
	"", "a", "draft", "Hello, world!", `<b>"quoted" & 'single'</b>`, `back\slash \\ \"`,
	"\x00\x01\x07\b\t\n\v\f\r\x1b\x1f\x7f", "line\u2028sep\u2029para", "\xff", "ok\xffbad\xc3(\xe2\x82",
	"中文的答案：单位在第 3 分钟出现。\n", "emoji 😀👍🏽🇫🇷", "é\u0301 ñ", "\ufffd literal", "\u00a0nbsp\u200b",
	strings.Repeat("x", 300), "e-09", "null", "{}",
}

// textAtoms are the pieces random texts are made of; the last ones are not UTF-8.
var textAtoms = []string{
	"a", "Z", "0", " ", "<", ">", "&", `"`, `\`, "/", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
	"é", "中", "文", "😀", "\u2028", "\u2029", "\ufffd", "\u00ff",
	"\xff", "\xc3", "\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80",
}

const invalidAtoms = 6 // the last textAtoms, which are not UTF-8

// randomText joins up to 12 atoms, UTF-8 only when valid.
func randomText(rng *rand.Rand, valid bool) string {
	atoms := textAtoms
	if valid {
		atoms = atoms[:len(atoms)-invalidAtoms]
	}
	var b strings.Builder
	for range rng.IntN(13) {
		b.WriteString(atoms[rng.IntN(len(atoms))])
	}
	return b.String()
}

func (f *traceFiller) text() string {
	for {
		var s string
		switch r := f.rng.IntN(10); {
		case r < 2 && len(f.extraTexts) > 0:
			s = f.extraTexts[f.rng.IntN(len(f.extraTexts))]
		case r < 6:
			s = traceTexts[f.rng.IntN(len(traceTexts))]
		default:
			s = randomText(f.rng, f.exact)
		}
		if f.exact && !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "?")
		}
		if s != "" || !f.full {
			return s
		}
	}
}

// traceInts are integers at the edges of the encodings.
var traceInts = []int64{0, 1, -1, 2, 3, 7, 10, 200, 429, 4096, -123456, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64}

func (f *traceFiller) integer() int64 {
	for {
		var n int64
		switch r := f.rng.IntN(10); {
		case r < 2 && len(f.extraInts) > 0:
			n = f.extraInts[f.rng.IntN(len(f.extraInts))]
		case r < 7:
			n = traceInts[f.rng.IntN(len(traceInts))]
		default:
			n = f.rng.Int64() >> f.rng.IntN(64)
		}
		if n != 0 || !f.full {
			return n
		}
	}
}

// severity returns a known severity, or when not exact also an unknown one.
func (f *traceFiller) severity() int64 {
	if f.exact || f.rng.IntN(4) > 0 {
		n := int64(f.rng.IntN(int(Fatal) + 1))
		if n == 0 && f.full {
			n = int64(Fatal)
		}
		return n
	}
	return []int64{-1, int64(Fatal) + 1, 99, math.MinInt64, math.MaxInt64}[f.rng.IntN(5)]
}

// traceDurations are durations at the edges of the millisecond encoding: below a
// microsecond, fractions, the extremes.
var traceDurations = []int64{0, 1, -1, 999, 1000, 1001, 123456, 1_000_000, 1_500_000, 12_345_678_901, -999_999,
	1<<53 + 1, math.MaxInt64, math.MinInt64, 1_000_000_000_000_000_000}

func (f *traceFiller) duration() int64 {
	for {
		var d int64
		switch r := f.rng.IntN(10); {
		case f.exact:
			d = int64(f.rng.IntN(20_000_000)-1_000_000) * int64(time.Millisecond)
		case r < 2 && len(f.extraInts) > 0:
			d = f.extraInts[f.rng.IntN(len(f.extraInts))]
		case r < 6:
			d = traceDurations[f.rng.IntN(len(traceDurations))]
		default:
			d = f.rng.Int64() >> f.rng.IntN(64)
			if f.rng.IntN(2) == 0 {
				d = -d
			}
		}
		if d != 0 || !f.full {
			return d
		}
	}
}

// traceZones are zones with whole-hour, half-hour and odd offsets; the last ones
// are beyond what RFC 3339 can write.
var traceZones = []*time.Location{
	time.UTC, time.Local, time.FixedZone("", 0), time.FixedZone("IST", 5*3600+1800),
	time.FixedZone("NST", -(3*3600 + 1800)), time.FixedZone("LMT", 3600+17), time.FixedZone("LINT", 14*3600),
	time.FixedZone("", -(23*3600 + 59*60)),
	time.FixedZone("far", 24*3600), time.FixedZone("farther", -(30 * 3600)),
}

const invalidZones = 2 // the last traceZones, which RFC 3339 cannot write

// traceNanos are sub-second parts with and without trailing zeros.
var traceNanos = []int64{0, 1, 10, 123_000_000, 123_456_789, 500_000_000, 999_999_999}

func (f *traceFiller) time() time.Time {
	zones := traceZones
	if f.exact {
		zones = zones[:len(zones)-invalidZones]
	}
	zone := zones[f.rng.IntN(len(zones))]
	const year1, year9999 = -62135596800, 253402300799 // Unix seconds
	secs := year1 + 86400 + f.rng.Int64N(year9999-year1-2*86400)
	if !f.exact {
		switch f.rng.IntN(10) {
		case 0:
			return time.Time{}
		case 1:
			secs = year1 - 366*86400 - f.rng.Int64N(1<<40) // before year 0
		case 2:
			secs = year9999 + 1 + f.rng.Int64N(1<<40)
		}
	}
	nanos := traceNanos[f.rng.IntN(len(traceNanos))]
	if f.rng.IntN(3) == 0 {
		nanos = f.rng.Int64N(1e9)
	}
	return time.Unix(secs, nanos).In(zone)
}

// benchAnswerPath is the answer factgate bench's mock gives.
const benchAnswerPath = "../cmd/factgate/demodata/clean_answer.md"

// BenchmarkAppendStringAnswer writes the bench's answer (CJK prose and a claims
// block) as a JSON string, as a trace writes a draft.
func BenchmarkAppendStringAnswer(b *testing.B) {
	raw, err := os.ReadFile(benchAnswerPath)
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw)
	b.SetBytes(int64(len(s)))
	var buf []byte
	for b.Loop() {
		buf = appendString(buf[:0], s)
	}
}

// TestTraceJSONBenchTrace: the bench's trace, decoded, encodes to the bytes it
// was read from.
func TestTraceJSONBenchTrace(t *testing.T) {
	t.Parallel()
	tr, raw := loadBenchTrace(t)
	if !compareTraceJSON(t, tr) {
		return
	}
	got, err := tr.MarshalJSON()
	if err != nil || !bytes.Equal(got, raw) {
		t.Errorf("MarshalJSON = %v, %s", err, firstDifference(got, raw))
	}
}

// TestStringMask compares stringMask with a byte-by-byte reference on every byte
// at every position of a word of each filler byte, and on random words of bytes
// around the edges of the tests, where a carry or borrow from one byte into the
// next would show.
func TestStringMask(t *testing.T) {
	t.Parallel()
	reference := func(w [8]byte) uint64 {
		var m uint64
		for k, c := range w {
			if c >= utf8.RuneSelf || !htmlSafe[c] {
				m |= 0x80 << (8 * k)
			}
		}
		return m
	}
	check := func(w [8]byte) {
		t.Helper()
		if got, want := stringMask(load8(string(w[:]), 0)), reference(w); got != want {
			t.Fatalf("stringMask(%q) = %#x, want %#x", w, got, want)
		}
	}
	for f := range 256 {
		for c := range 256 {
			for pos := range 8 {
				var w [8]byte
				for k := range w {
					w[k] = byte(f)
				}
				w[pos] = byte(c)
				check(w)
			}
		}
	}
	alphabet := []byte("\x00\x01\x1f !\"#%&'\\[]<=>?;\x7f\x80\x9f\xa0\xa2\xa6\xbc\xbe\xdc\xe4\xffa")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500000 {
		var w [8]byte
		for k := range w {
			w[k] = alphabet[rng.IntN(len(alphabet))]
		}
		check(w)
	}
}

// FuzzAppendString compares appendString with encoding/json on fuzzed strings,
// at each offset from the eight-byte words it reads and with CJK text around.
func FuzzAppendString(f *testing.F) {
	f.Add("")
	f.Add("## 对局概览\nPlayerA（盟军）在 1:24 打包\n```json\n{\n  \"unitId\": 246,\n  \"a\": \"<b>&\"\n}\n```")
	f.Add("\u2028\u2029\u2027\u202a\xe2\x80\xa8\xe2\x80\xe2")
	f.Add("\xed\xa0\x80\xed\x9f\xbf\xe0\xa0\x80\xe0\x9f\xbf\xf0\x90\x80\x80\xf0\x8f\xbf\xbf\xf4\x8f\xbf\xbf\xf4\x90\x80\x80")
	f.Add("é\xc2\xc1\xbf\xc3(\xf5\x80\x80\x80\x00\x1f\x7f😀")
	f.Fuzz(func(t *testing.T, s string) {
		for k := range 9 {
			checkAppendString(t, "01234567"[:k]+s, s+"文"[:k%4], "中文"[:k%7]+s+"\u2028")
		}
	})
}
