package mockupstream

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
	}{
		{name: "plain", in: "hello"},
		{name: "Chinese and emoji", in: "盟军基地车 🙂"},
		{name: "quotes and backslash", in: `a "b" \c`},
		{name: "control characters", in: "\x00\x01\b\f\n\r\t\x1f"},
		{name: "invalid UTF-8", in: "a\xffb\xc3"},
		{name: "line separators", in: "a\u2028b\u2029c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := appendJSONString(nil, c.in)
			var back string
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("%s is not a JSON string: %v", got, err)
			}
			want, _ := json.Marshal(c.in)
			var wantBack string
			_ = json.Unmarshal(want, &wantBack)
			if back != wantBack {
				t.Errorf("%q encodes to %s, which decodes to %q; encoding/json gives %q", c.in, got, back, wantBack)
			}
		})
	}
}

// FuzzUnescapedLen checks that prompt tokens, counted without decoding, count the
// same bytes as the decoded text the rules match.
func FuzzUnescapedLen(f *testing.F) {
	for _, seed := range []string{"", "abc", `a\nb`, `\u00e9`, `\ud83d\ude42`, `\ud83d`, `\ude42\ud83d`, `\ud83dx`, `\ud83d\u0041`, `\\u0041`, "盟军", `\"\/\b\f\r\t`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if raw, err := json.Marshal(s); err == nil {
			if got, want := unescapedLen(string(raw)), len(gjson.ParseBytes(raw).Str); got != want {
				t.Errorf("unescapedLen(%s) = %d, decoded length %d", raw, got, want)
			}
		}
		raw := `"` + s + `"`
		if r := gjson.Parse(raw); gjson.Valid(raw) && r.Type == gjson.String {
			if got, want := unescapedLen(raw), len(r.Str); got != want {
				t.Errorf("unescapedLen(%s) = %d, decoded length %d", raw, got, want)
			}
		}
	})
}

// FuzzForEachMember checks the allocation-free member scanner against gjson on
// valid JSON objects.
func FuzzForEachMember(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"role":"user","content":"hi"}`, ` { "a" : [1, {"b":"]}"}] , "c":null,"d":-1.5e3 ,"e":{"f":"\"}"}} `,
		`{"content":[{"type":"text","text":"x\ny"}],"z":true}`, `{"\u0072ole":"x"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, obj string) {
		root := gjson.Parse(obj)
		if !gjson.Valid(obj) || !root.IsObject() {
			return
		}
		var want, got []string
		root.ForEach(func(k, v gjson.Result) bool {
			want = append(want, k.Str, v.Raw)
			return true
		})
		forEachMember(obj, func(k, v string) bool {
			got = append(got, jsonStringValue(k), v)
			return true
		})
		if len(got) != len(want) {
			t.Fatalf("%s: scanner %q, gjson %q", obj, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: scanner %q, gjson %q", obj, got, want)
			}
		}
	})
}
