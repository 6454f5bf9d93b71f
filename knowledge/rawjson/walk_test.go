package rawjson

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEachMember(t *testing.T) {
	t.Parallel()
	obj := ` { "role" : "user", "content":[{"type":"text","text":"a]}\"b"}] ,"n":-1.5e3,"\u0072ole":null,"m":{"x":"}"}} `
	type member struct {
		key, raw    string
		keyOff, off int
	}
	var got []member
	EachMember(obj, func(m Member) bool {
		got = append(got, member{Key(m.Key), m.Raw, m.KeyOff, m.Off})
		if obj[m.KeyOff] != '"' || obj[m.Off:m.Off+len(m.Raw)] != m.Raw {
			t.Errorf("member %q: offsets %d, %d do not point at its key and value", m.Key, m.KeyOff, m.Off)
		}
		return true
	})
	want := []member{
		{"role", `"user"`, 3, 12},
		{"content", `[{"type":"text","text":"a]}\"b"}]`, 20, 30},
		{"n", "-1.5e3", 65, 69},
		{"role", "null", 76, 88},
		{"m", `{"x":"}"}`, 93, 97},
	}
	if len(got) != len(want) {
		t.Fatalf("members %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("member %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if v, ok := Find(obj, "role"); !ok || v.Raw != "null" {
		t.Errorf(`Find(role) = %+v, %v; want the last "role", null`, v, ok)
	}
	if _, ok := Find(obj, "absent"); ok {
		t.Error("Find found an absent member")
	}
	n := 0
	EachMember(obj, func(Member) bool { n++; return false })
	if n != 1 {
		t.Errorf("EachMember went on after fn returned false: %d calls", n)
	}
}

func TestEachElement(t *testing.T) {
	t.Parallel()
	var got []string
	EachElement(`[ "a,]" , {"b":[1,2]},3 ,null,[]]`, func(v Value) bool {
		got = append(got, v.Raw)
		return true
	})
	want := []string{`"a,]"`, `{"b":[1,2]}`, "3", "null", "[]"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("elements %q, want %q", got, want)
	}
	EachElement(`{"a":1}`, func(Value) bool { t.Fatal("an object has no elements"); return false })
}

// TestWalkerStopsOnInvalidInput feeds input the walker is not meant for (the proxy
// checks JSON first): it must stop, not panic or loop.
func TestWalkerStopsOnInvalidInput(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`{"a":`, `{"a"`, `{"a":"b`, `{"a":[1,2`, `[`, `["a`, `{"a":1,,}`, `{"a" 1}`, `[1 2]`, `{`, `{"\`} {
		EachMember(in, func(Member) bool { return true })
		EachElement(in, func(Value) bool { return true })
		Find(in, "a")
	}
}

// decodedMembers lists an object's members with encoding/json: the decoded keys
// and the compacted raw values.
func decodedMembers(t *testing.T, obj []byte) (keys, values []string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		values = append(values, compact(t, v))
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return keys, values
}

func compact(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return b.String()
}

// asEncodingJSON decodes a string as encoding/json does: each byte that is not
// UTF-8 becomes U+FFFD (the walker keeps such bytes as they are).
func asEncodingJSON(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // an invalid byte ranges as one U+FFFD
	}
	return b.String()
}

// FuzzWalker checks the members and elements the walker finds against
// encoding/json on every valid object and array, and that it never panics on
// anything else.
func FuzzWalker(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"role":"user","content":"hi"}`, ` { "a" : [1, {"b":"]}"}] , "c":null,"d":-1.5e3 ,"e":{"f":"\"}"}} `,
		`{"content":[{"type":"text","text":"x\ny"}],"z":true}`, `{"\u0072ole":"x","\ud83d\ude42":"\\"}`,
		`[1,"a",{"b":[]},[[]],null]`, `{"a":1,"a":2}`, "{\"\xff\":\"\xfe\"}", `{"a":"\ud800x"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !ValidString(in, 0) {
			EachMember(in, func(Member) bool { return true })
			EachElement(in, func(Value) bool { return true })
			return
		}
		trimmed := strings.TrimLeft(in, " \t\r\n")
		switch trimmed[0] {
		case '{':
			keys, values := decodedMembers(t, []byte(in))
			i := 0
			EachMember(in, func(m Member) bool {
				if i >= len(keys) {
					t.Fatalf("%s: the walker finds more than encoding/json's %d members", in, len(keys))
				}
				if got := asEncodingJSON(Key(m.Key)); got != keys[i] || !KeyIs(m.Key, Key(m.Key)) {
					t.Fatalf("%s: member %d: key %q, encoding/json %q", in, i, got, keys[i])
				}
				if got := compact(t, []byte(m.Raw)); got != values[i] {
					t.Fatalf("%s: member %d: value %s, encoding/json %s", in, i, got, values[i])
				}
				if in[m.KeyOff] != '"' || in[m.Off:m.Off+len(m.Raw)] != m.Raw {
					t.Fatalf("%s: member %d: offsets %d, %d", in, i, m.KeyOff, m.Off)
				}
				i++
				return true
			})
			if i != len(keys) {
				t.Fatalf("%s: the walker finds %d members, encoding/json %d", in, i, len(keys))
			}
		case '[':
			var want []json.RawMessage
			if err := json.Unmarshal([]byte(in), &want); err != nil {
				t.Fatal(err)
			}
			i := 0
			EachElement(in, func(v Value) bool {
				if i >= len(want) || compact(t, []byte(v.Raw)) != compact(t, want[i]) {
					t.Fatalf("%s: element %d is %s", in, i, v.Raw)
				}
				i++
				return true
			})
			if i != len(want) {
				t.Fatalf("%s: the walker finds %d elements, encoding/json %d", in, i, len(want))
			}
		case '"':
			var want string
			if err := json.Unmarshal([]byte(in), &want); err != nil {
				t.Fatal(err)
			}
			raw := strings.TrimSpace(in)
			got, ok := StringValue(raw)
			if !ok || asEncodingJSON(got) != want {
				t.Fatalf("StringValue(%s) = %q, %v; encoding/json %q", raw, got, ok, want)
			}
			if n := UnescapedLen(raw); n != len(got) {
				t.Fatalf("UnescapedLen(%s) = %d, decoded length %d", raw, n, len(got))
			}
		}
	})
}

func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"", "plain", "Mod: corona\n玩家: 青龙 (神州)", "a\nb\n\nc\r\nd\u000ae", "\"quoted\" \\ / \b\f\r\t", "😀 \u2028 \x01", string([]byte{0xff, 'a'})} {
		f.Add(s, 7)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if !utf8.ValidString(s) {
			return // encoding/json replaces invalid UTF-8; the walker sees only valid JSON
		}
		b, _ := json.Marshal(s)
		raw := string(b)
		inner := raw[1 : len(raw)-1]
		if got := Unescape(inner, -1); got != s {
			t.Fatalf("Unescape(%s) = %q, want %q", raw, got, s)
		}
		if limit < 0 {
			limit = -limit
		}
		head := Unescape(inner, limit)
		if !strings.HasPrefix(s, head) || len(head) < min(limit, len(s)) {
			t.Fatalf("Unescape(%s, %d) = %q, not a prefix of %q of at least %d bytes", raw, limit, head, s, limit)
		}
		room := make([]byte, 3, 3+min(limit, len(inner))+utf8.UTFMax)
		if got := AppendUnescape(room, inner, limit); string(got[3:]) != head || &got[0] != &room[0] {
			t.Fatalf("AppendUnescape(%s, %d) appended %q (in place %v), want %q", raw, limit, got[3:], &got[0] == &room[0], head)
		}
		if v, ok := StringValue(raw); !ok || v != s {
			t.Fatalf("StringValue(%s) = %q, %v", raw, v, ok)
		}
		// The first k lines: the text through its k-th newline (all of it when it
		// has fewer), cut at the limit as well.
		for k := 1; k <= 3; k++ {
			want := s
			for i, n := 0, 0; i < len(s); i++ {
				if s[i] == '\n' {
					if n++; n == k {
						want = s[:i+1]
						break
					}
				}
			}
			got := string(AppendUnescapeLines(nil, inner, -1, k))
			if got != want {
				t.Fatalf("AppendUnescapeLines(%s, -1, %d) = %q, want %q", raw, k, got, want)
			}
			got = string(AppendUnescapeLines(nil, inner, limit, k))
			if short := Unescape(inner, limit); !strings.HasPrefix(want, got) || (got != want && got != short) {
				t.Fatalf("AppendUnescapeLines(%s, %d, %d) = %q, want the shorter of %q and %q", raw, limit, k, got, want, short)
			}
		}
		// Going on from where AppendUnescapeLinesFrom stopped, k lines at a time,
		// appends what one call does.
		for k := 1; k <= 3; k++ {
			for _, lim := range []int{-1, limit} {
				whole := string(AppendUnescapeLines(nil, inner, lim, 7))
				var got []byte
				in, left, rest := inner, 7, 0
				for left > 0 && rest >= 0 {
					step := min(k, left)
					budget := lim
					if lim >= 0 {
						budget = lim - len(got)
					}
					got, rest = AppendUnescapeLinesFrom(got, in, budget, step)
					if rest >= 0 {
						in, left = in[rest:], left-step
					}
				}
				if string(got) != whole {
					t.Fatalf("AppendUnescapeLinesFrom(%s, %d) %d lines at a time = %q, want %q", raw, lim, k, got, whole)
				}
			}
		}
		if n := UnescapedLen(raw); n != len(s) {
			t.Fatalf("UnescapedLen(%s) = %d, want %d", raw, n, len(s))
		}
		if end := valueEnd(raw+`,"x"`, 0); end != len(raw) {
			t.Fatalf("valueEnd(%s) = %d, want %d", raw, end, len(raw))
		}
	})
}

// unescapePieces are what appendUnescapeAll's inputs are built from: plain runs
// of every length around its eight-byte step, every escape (valid, invalid, cut
// short, surrogate pairs and lone halves) and multi-byte text.
var unescapePieces = []string{
	"a", "bcdefgh", "ijklmnopq", "玩家", "😀", `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`,
	`\u0041`, `\u00e9`, `\u2028`, `\ud83d\ude00`, `\ud83d`, `\ude00`, `\ud83dx`, `\u12`, `\x`, `\`,
	"\x00", "\xff", `{\"unitId\":\"AlliedMCV\"}`,
}

// TestUnescapeAllAgreesWithTheLineDecoder: the whole-text decoder appends what
// the line decoder does without bounds, for texts dense with escapes, with or
// without bytes already in dst.
func TestUnescapeAllAgreesWithTheLineDecoder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var b strings.Builder
		for n := rng.IntN(12); n > 0; n-- {
			b.WriteString(unescapePieces[rng.IntN(len(unescapePieces))])
		}
		checkUnescapeAll(t, b.String())
	}
}

func checkUnescapeAll(t *testing.T, s string) {
	t.Helper()
	for _, prefix := range []string{"", "head:"} {
		want := string(AppendUnescapeLines([]byte(prefix), s, -1, -1))
		if got := string(appendUnescapeAll([]byte(prefix), s)); got != want {
			t.Fatalf("appendUnescapeAll(%q, %q) = %q, the line decoder gives %q", prefix, s, got, want)
		}
	}
	if got, want := Unescape(s, -1), string(AppendUnescapeLines(nil, s, -1, -1)); got != want {
		t.Fatalf("Unescape(%q, -1) = %q, want %q", s, got, want)
	}
}

func FuzzUnescapeAllAgreesWithTheLineDecoder(f *testing.F) {
	for _, s := range unescapePieces {
		f.Add(s + s + "0123456789" + s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkUnescapeAll(t, s) })
}
