package reqcontext

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/factgate/factgate/interceptors"
)

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestUserTexts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"string contents of user messages only",
			`{"messages":[{"role":"system","content":"sys"},{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"content":"c","role":"user"}]}`,
			[]string{"a", "c"}},
		{"text parts, other parts skipped",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"one"},{"type":"image_url","image_url":{"url":"https://x/y.png"}},{"text":"two","type":"text"}]}]}`,
			[]string{"one", "two"}},
		{"escapes are decoded",
			`{"messages":[{"role":"user","content":"Mod: corona\n\u73a9\u5bb6: \"A\" (\u795e\u5dde) \ud83d\ude00\\\/"}]}`,
			[]string{"Mod: corona\n玩家: \"A\" (神州) 😀\\/"}},
		{"messages after other fields, odd spacing",
			"{\"model\" : \"m\" ,\n \"temperature\":0.2, \"messages\" : [ { \"role\" : \"user\" , \"content\" : \"x\" } ] }",
			[]string{"x"}},
		{"no messages", `{"model":"m"}`, nil},
		{"messages is not an array", `{"messages":{"role":"user"}}`, nil},
		{"content null or a number is skipped", `{"messages":[{"role":"user","content":null},{"role":"user","content":5},{"role":"user"}]}`, nil},
		{"a role with an escape", `{"messages":[{"role":"\u0075ser","content":"z"}]}`, []string{"z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(tc.body)
			got := UserTexts(body)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			// The texts are copies: editing the body does not change them.
			for i := range body {
				body[i] = 'X'
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("the texts alias the body: %q", got)
			}
		})
	}
}

func TestUserTextHeadsMatchTheFullTexts(t *testing.T) {
	t.Parallel()
	log := replay(t, "corona_celestial_vs_allied.txt")
	body := chatBody(t, log, "")
	for _, limit := range []int{1, 10, 100, 4096, 1 << 20} {
		for _, lines := range []int{1, 3, 200, 1 << 20} {
			bounds := headBounds{bytes: limit, lines: lines}
			heads := decodedHeads(string(body), bounds, nil)
			if len(heads) != 1 {
				t.Fatalf("limit %d: %d heads", limit, len(heads))
			}
			ex := &interceptors.Exchange{}
			if pooled := decodedHeads(string(body), bounds, ex.Buffer); len(pooled) != 1 || pooled[0] != heads[0] {
				t.Fatalf("limit %d, %d lines: the head decoded into the exchange's buffer differs", limit, lines)
			}
			ex.Release()
			// The head is a prefix of the text that holds its first lines lines
			// within the first limit bytes: what the rules read.
			want := log[:min(limit, len(log))]
			if n := strings.Count(want, "\n"); n >= lines {
				cut := 0
				for range lines {
					cut += strings.IndexByte(want[cut:], '\n') + 1
				}
				want = want[:cut]
			}
			if !strings.HasPrefix(log, heads[0]) || !strings.HasPrefix(heads[0], want) {
				t.Fatalf("limit %d, %d lines: head of %d bytes does not hold the first %d bytes of the text the rules read", limit, lines, len(heads[0]), len(want))
			}
			if lines < strings.Count(log, "\n") && strings.Count(heads[0], "\n") > lines {
				t.Fatalf("limit %d, %d lines: head of %d lines decoded", limit, lines, strings.Count(heads[0], "\n"))
			}
		}
	}
}

func TestFindMessages(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"m", "messages" : [ {"role":"system","content":"s"} ,{"content":[{"type":"text","text":"u"}],"role":"user"},{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool"} ,"odd"], "n":1}`)
	ml, ok := FindMessages(body)
	if !ok {
		t.Fatal("no messages found")
	}
	if got := string(body[ml.Start:ml.End]); !strings.HasPrefix(got, "[ {") || !strings.HasSuffix(got, `"odd"]`) {
		t.Fatalf("array span %q", got)
	}
	want := []struct{ role, raw, content string }{
		{"system", `{"role":"system","content":"s"}`, `"s"`},
		{"user", `{"content":[{"type":"text","text":"u"}],"role":"user"}`, `[{"type":"text","text":"u"}]`},
		{"assistant", `{"role":"assistant","content":null,"tool_calls":[]}`, `null`},
		{"tool", `{"role":"tool"}`, ``},
		{"", `"odd"`, ``},
	}
	if len(ml.Items) != len(want) {
		t.Fatalf("%d messages, want %d", len(ml.Items), len(want))
	}
	for i, w := range want {
		m := ml.Items[i]
		if m.Role != w.role || string(body[m.Start:m.End]) != w.raw || string(m.Content(body)) != w.content {
			t.Errorf("message %d: role %q raw %q content %q; want %q %q %q", i, m.Role, body[m.Start:m.End], m.Content(body), w.role, w.raw, w.content)
		}
	}
	for _, b := range []string{`{"model":"m"}`, `{"messages":{}}`, `{"messages":null}`, `[]`} {
		if _, ok := FindMessages([]byte(b)); ok {
			t.Errorf("FindMessages(%s) found messages", b)
		}
	}
}

// referenceUserTexts is UserTexts by decoding the whole body with encoding/json
// (duplicate keys: the last wins, as in the scanner).
func referenceUserTexts(body []byte) []string {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	msgs, _ := doc["messages"].([]any)
	var out []string
	for _, m := range msgs {
		obj, _ := m.(map[string]any)
		if role, _ := obj["role"].(string); role != "user" {
			continue
		}
		switch c := obj["content"].(type) {
		case string:
			out = append(out, c)
		case []any:
			for _, p := range c {
				part, _ := p.(map[string]any)
				if typ, _ := part["type"].(string); typ == "text" {
					if text, ok := part["text"].(string); ok {
						out = append(out, text)
					}
				}
			}
		}
	}
	return out
}

func FuzzUserTextsAgreeWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"a\nb"},{"role":"system","content":"s"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"u"}}]}]}`,
		`{"messages":[{"role":"user","role":"system","content":"dup"}],"messages":[{"role":"user","content":"last"}]}`,
		`{"a":[1,{"b":"]}"}],"messages":[{"content":"\"q\" \\ \u00e9","role":"user"}]}`,
		` { "messages" : [ ] } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) || !utf8.Valid(body) {
			return // the proxy rejects invalid JSON; encoding/json rewrites invalid UTF-8
		}
		got, want := UserTexts(body), referenceUserTexts(body)
		if !slices.Equal(got, want) {
			t.Fatalf("UserTexts(%s)\n got %q\nwant %q", body, got, want)
		}
	})
}
