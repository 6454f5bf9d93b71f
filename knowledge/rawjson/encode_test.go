package rawjson

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestAppendString(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{name: "plain", in: "hello", want: `"hello"`},
		{name: "Chinese and emoji", in: "盟军基地车 🙂", want: `"盟军基地车 🙂"`},
		{name: "HTML stays", in: "<a&b>", want: `"<a&b>"`},
		{name: "quotes and backslash", in: `a "b" \c`, want: `"a \"b\" \\c"`},
		{name: "control characters", in: "\x00\x01\b\f\n\r\t\x1f", want: `"\u0000\u0001\u0008\u000c\n\r\t\u001f"`},
		{name: "invalid UTF-8, byte by byte", in: "a\xff\xfeb\xc3", want: `"a\ufffd\ufffdb\ufffd"`},
		{name: "line separators", in: "a\u2028b\u2029c", want: `"a\u2028b\u2029c"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := AppendString([]byte("x"), c.in)
			if string(got) != "x"+c.want {
				t.Fatalf("AppendString(%q) = %s, want %s", c.in, got[1:], c.want)
			}
			roundTrip(t, c.in, got[1:])
		})
	}
}

// roundTrip checks that out, the encoding of s, is one JSON string that decodes
// to what encoding/json's own encoding of s decodes to, with nothing a
// JavaScript or line-based reader would trip on.
func roundTrip(t *testing.T, s string, out []byte) {
	t.Helper()
	var back string
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("%q encodes to %s, which is not a JSON string: %v", s, out, err)
	}
	want, _ := json.Marshal(s)
	var wantBack string
	_ = json.Unmarshal(want, &wantBack)
	if back != wantBack {
		t.Fatalf("%q encodes to %s, which decodes to %q; encoding/json gives %q", s, out, back, wantBack)
	}
	if !utf8.Valid(out) || bytes.ContainsRune(out, '\u2028') || bytes.ContainsRune(out, '\u2029') {
		t.Fatalf("%q encodes to %q: not UTF-8, or a raw line separator", s, out)
	}
	for _, c := range out {
		if c < 0x20 {
			t.Fatalf("%q encodes to %q: a raw control character", s, out)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "hello", "盟军 🙂", "\x00\n\"\\", "a\xffb", "\u2028\u2029", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, s)
		roundTrip(t, s, out)
		if v, ok := StringValue(string(out)); !ok || asEncodingJSON(v) != asEncodingJSON(s) {
			t.Fatalf("StringValue(%s) = %q, %v; want %q", out, v, ok, s)
		}
	})
}
