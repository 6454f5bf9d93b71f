package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		in       string
		maxDepth int
		want     string // "" for valid input, else the whole error
	}{
		{name: "object", in: `{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1,"x":null,"y":true,"z":false}`},
		{name: "scalars", in: ` -0.5e+10 `},
		{name: "escapes", in: `"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude42"`},
		{name: "not UTF-8 in a string", in: "\"\xff\xfe\""},
		{name: "empty", in: "", want: "unexpected end of JSON input at line 1, column 1"},
		{name: "white space only", in: " \n ", want: "unexpected end of JSON input at line 2, column 2"},
		{name: "truncated", in: `{"global": {"entries": [`, want: "unexpected end of JSON input at line 1, column 25"},
		{name: "missing comma", in: "{\n  \"id\": \"a\" \"tags\": []}", want: `invalid character '"' after object key:value pair at line 2, column 13`},
		{name: "trailing comma", in: `[1,]`, want: "invalid character ']' looking for beginning of value at line 1, column 4"},
		{name: "trailing data", in: `{} {}`, want: "invalid character '{' after top-level value at line 1, column 4"},
		{name: "control character", in: "\"a\tb\"", want: `invalid character '\t' in string literal at line 1, column 3`},
		{name: "bad escape", in: `"\x"`, want: "invalid character 'x' in string escape code at line 1, column 3"},
		{name: "bad hex", in: `"\u00g0"`, want: `invalid character 'g' in \u hexadecimal character escape at line 1, column 6`},
		{name: "bad literal", in: `[tru]`, want: "invalid character ']' in literal true (expecting 'e') at line 1, column 5"},
		{name: "bad number", in: `-x`, want: "invalid character 'x' in numeric literal at line 1, column 2"},
		{name: "column in characters", in: `{"盟军": x}`, want: "invalid character 'x' looking for beginning of value at line 1, column 8"},
		{name: "at the bound", in: strings.Repeat("[", 128) + strings.Repeat("]", 128)},
		{name: "one level too deep", in: strings.Repeat("[", 129) + strings.Repeat("]", 129), want: "nesting deeper than 128 levels at line 1, column 129"},
		{name: "objects too deep", in: strings.Repeat(`{"a":`, 4) + "1}}}}", maxDepth: 3, want: "nesting deeper than 3 levels at line 1, column 16"},
		{name: "deep beyond the small stack", in: strings.Repeat(`[{"a":`, 300) + "0" + strings.Repeat("}]", 300), maxDepth: 600},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := CheckString(c.in, c.maxDepth)
			if err2 := Check([]byte(c.in), c.maxDepth); (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
				t.Fatalf("CheckString: %v; Check: %v", err, err2)
			}
			if ValidString(c.in, c.maxDepth) != (err == nil) || Valid([]byte(c.in), c.maxDepth) != (err == nil) {
				t.Fatalf("Valid disagrees with Check's %v", err)
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Check(%q) = %v, want valid", c.in, err)
			case c.want != "" && (err == nil || err.Error() != c.want):
				t.Fatalf("Check(%q) = %v, want %s", c.in, err, c.want)
			}
		})
	}
}

func TestCheckReportsTheDepthBound(t *testing.T) {
	t.Parallel()
	err := Check(bytes.Repeat([]byte("["), 16<<20), 0)
	var se *SyntaxError
	if !errors.As(err, &se) || !errors.Is(err, ErrTooDeep) {
		t.Fatalf("16 MiB of [: %v, want a *SyntaxError wrapping ErrTooDeep", err)
	}
	if se.MaxDepth != DefaultMaxDepth || se.Offset != DefaultMaxDepth || se.Line != 1 || se.Column != DefaultMaxDepth+1 {
		t.Fatalf("16 MiB of [: %+v", se)
	}
	if errors.Is(Check([]byte("[}"), 0), ErrTooDeep) {
		t.Fatal("a syntax error wraps ErrTooDeep")
	}
}

// TestCheckAgreesWithEncodingJSON compares the verdict, the problem and the offset
// with encoding/json's on inputs within the bound.
func TestCheckAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, in := range checkSeeds {
		agreeWithEncodingJSON(t, []byte(in))
	}
}

var checkSeeds = []string{
	``, ` `, `{`, `}`, `[`, `]`, `{}`, `[]`, `[[]]`, `{"a":[{"b":null}]}`, `{"a" 1}`, `{"a":1 "b":2}`,
	`{"a":1,}`, `{,}`, `{1:2}`, `[1 2]`, `[1,,2]`, `"abc`, `"a\`, `"\u12`, `"\u12x4"`, `"\q"`,
	"\"\x01\"", "\"\x7f\x80\xff\"", `tru`, `trUe`, `fals`, `nul`, `nulll`, `-`, `-a`, `01`, `1.`, `1.e`,
	`1e`, `1e+`, `1e+x`, `1E-7`, `-0.0e0`, `0x10`, `.5`, `+1`, "1\n2", "[\n1,\n2\n", `{"a":"b"}x`,
	"\xef\xbb\xbf{}", "\x00", `'a'`, `[true,false,null]`, `{"a":{"b":{"c":[1,2,{"d":"e"}]}}}`,
	"\u2028[]", `"\ud800"`, `[1e1000]`, `{"":""}`, `[-]`, `[-0]`, `[-01]`, `{"a":-}`,
}

func agreeWithEncodingJSON(t *testing.T, in []byte) {
	t.Helper()
	if nesting(in) > 1000 {
		return // encoding/json stops at 10,000 levels with its own error
	}
	err := Check(in, 1000)
	var raw json.RawMessage
	jerr := json.Unmarshal(in, &raw)
	if (err == nil) != (jerr == nil) {
		t.Fatalf("%q: Check says %v, encoding/json says %v", in, err, jerr)
	}
	if err == nil {
		return
	}
	var se *SyntaxError
	var jse *json.SyntaxError
	if !errors.As(err, &se) || !errors.As(jerr, &jse) {
		t.Fatalf("%q: Check %v, encoding/json %v: not both syntax errors", in, err, jerr)
	}
	// encoding/json counts the bytes read, the wrong one included, except at the end.
	wantOff, wantProblem := int(jse.Offset)-1, jse.Error()
	if se.Problem == "unexpected end of JSON input" {
		wantOff = len(in)
		// A top-level scalar cut short is, to encoding/json, followed by a space it
		// invents ("invalid character ' ' in literal true"); Check says what happened.
		if int(jse.Offset) == len(in) && strings.HasPrefix(wantProblem, "invalid character ' ' ") {
			wantProblem = se.Problem
		}
	}
	if se.Problem != wantProblem || se.Offset != wantOff {
		t.Fatalf("%q: Check %q at %d; encoding/json %q at %d", in, se.Problem, se.Offset, jse.Error(), jse.Offset)
	}
}

// nesting is an upper bound of the input's nesting: the count of opening brackets.
func nesting(b []byte) int { return bytes.Count(b, []byte("[")) + bytes.Count(b, []byte("{")) }

func FuzzCheck(f *testing.F) {
	for _, s := range checkSeeds {
		f.Add([]byte(s), 0)
	}
	f.Add([]byte(strings.Repeat("[", 200)), 3)
	f.Add([]byte(`{"a":{"b":[1]}}`), 2)
	f.Fuzz(func(t *testing.T, in []byte, maxDepth int) {
		agreeWithEncodingJSON(t, in)
		// Within any bound: valid and shallow enough, or refused as too deep only
		// where a deeper bound accepts it.
		maxDepth %= 300
		err := Check(in, maxDepth)
		if errors.Is(err, ErrTooDeep) {
			bound := maxDepth
			if bound < 1 {
				bound = DefaultMaxDepth
			}
			var se *SyntaxError
			errors.As(err, &se)
			if se.MaxDepth != bound || se.Offset >= len(in) || (in[se.Offset] != '[' && in[se.Offset] != '{') {
				t.Fatalf("%q: depth error %+v for bound %d", in, se, bound)
			}
			if Valid(in, 1<<20) != json.Valid(in) && nesting(in) <= 1000 {
				t.Fatalf("%q: unbounded Check disagrees with json.Valid", in)
			}
		} else if nesting(in) <= 1000 && (err == nil) != json.Valid(in) {
			t.Fatalf("%q (bound %d): Check %v, json.Valid %v", in, maxDepth, err, json.Valid(in))
		}
	})
}

// TestSpecialMaskAgreesWithThePlainTable: the eight-byte test finds the first
// byte that is not plain wherever it stands among plain ones, and never flags a
// word of plain bytes (UTF-8 included); with several, it finds the first.
func TestSpecialMaskAgreesWithThePlainTable(t *testing.T) {
	t.Parallel()
	first := func(w [8]byte) int {
		for k, c := range w {
			if !plain[c] {
				return k
			}
		}
		return 8
	}
	fill := []byte("aZ09 ~\x7f\x80\xe4\xbd\xa0\xff")
	for c := 0; c < 256; c++ {
		for pos := range 8 {
			for _, f := range fill {
				var w [8]byte
				for k := range w {
					w[k] = f
				}
				w[pos] = byte(c)
				if got, want := bits.TrailingZeros64(specialMask(load8(w[:], 0)))>>3, first(w); got != want {
					t.Fatalf("byte %#x at %d among %#x: first special byte at %d, want %d", c, pos, f, got, want)
				}
				if v := load8(w[:], 0); wordMasks.special(v) != specialMask(v) {
					t.Fatalf("%q: wordMasks.special %#x, specialMask %#x", w, wordMasks.special(v), specialMask(v))
				}
			}
		}
	}
	// Random words over bytes around the boundaries: borrows from one byte into
	// the next must not move the answer.
	alphabet := []byte("\x00\x01\x02\x03\x1f\x20\x21\"#\\\x5b\x5d\x7f\x80\x9f\xa0\xa1\xa2\xe4\xffa")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var w [8]byte
		for k := range w {
			w[k] = alphabet[rng.IntN(len(alphabet))]
		}
		if got, want := bits.TrailingZeros64(specialMask(load8(w[:], 0)))>>3, first(w); got != want {
			t.Fatalf("%q: first special byte at %d, want %d", w, got, want)
		}
		if v := load8(w[:], 0); wordMasks.special(v) != specialMask(v) {
			t.Fatalf("%q: wordMasks.special %#x, specialMask %#x", w, wordMasks.special(v), specialMask(v))
		}
	}
}

// TestStringLiteralEndAgreesWithStringFailure: the fast string scanner, which
// steps over escapes inside its word loop, accepts exactly the literals the
// escape-at-a-time reader accepts, and ends them at the same byte, wherever the
// escapes, quotes and control characters fall against its sixteen-byte blocks.
func TestStringLiteralEndAgreesWithStringFailure(t *testing.T) {
	t.Parallel()
	alphabet := []string{"a", "\xe4\xbd\xa0", "\\n", "\\\\", "\\\"", "\\u00e9", "\\u12", "\\", "\"", "\x01", "\x1f", " ", "]", "#", "\x7f", "\xff", "\\x"}
	rng := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	for range 300000 {
		b.Reset()
		b.WriteByte('"')
		for range rng.IntN(24) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		if rng.IntN(4) > 0 {
			b.WriteByte('"')
		}
		agreeOnString(t, b.String())
	}
	for _, s := range checkSeeds {
		if strings.HasPrefix(s, `"`) {
			agreeOnString(t, s)
		}
	}
}

func agreeOnString(t *testing.T, s string) {
	t.Helper()
	if len(s) == 0 || s[0] != '"' {
		return
	}
	end, f := stringFailure(s, 0)
	got := stringLiteralEnd(s, 0)
	if f.off >= 0 {
		end = -1
	}
	if got != end || stringLiteralEnd([]byte(s), 0) != end {
		t.Fatalf("%q: stringLiteralEnd %d, stringFailure %d (%+v)", s, got, end, f)
	}
}

func FuzzStringLiteralEnd(f *testing.F) {
	for _, s := range checkSeeds {
		f.Add(s)
	}
	f.Add(`"0:02.10 PlayerA 开始建造建筑 AlliedPowerPlant\n0:03.00 PlayerB\n\u00e9\"\\"`)
	f.Fuzz(func(t *testing.T, s string) {
		agreeOnString(t, `"`+s)
	})
}
