package revise

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
)

func fl(sec int, text string) interceptors.FactLine {
	return interceptors.FactLine{At: time.Duration(sec) * time.Second, Text: text}
}

func TestRelevantFacts(t *testing.T) {
	t.Parallel()
	a := interceptors.Issue{Facts: []interceptors.FactLine{fl(10, "a10"), fl(30, "a30"), fl(50, "a50")}}
	b := interceptors.Issue{Facts: []interceptors.FactLine{fl(30, "a30"), fl(20, "b20"), fl(40, "b40")}}
	tests := []struct {
		name    string
		issues  []interceptors.Issue
		max     int
		want    string
		omitted int
	}{
		{name: "union without duplicates, by time", issues: []interceptors.Issue{a, b}, max: 40, want: "a10 b20 a30 b40 a50"},
		{name: "no bound", issues: []interceptors.Issue{a, b}, max: 0, want: "a10 b20 a30 b40 a50"},
		{name: "bounded round-robin keeps each issue's first facts", issues: []interceptors.Issue{a, b}, max: 3, want: "a10 b20 a30", omitted: 2},
		{name: "a shared line counts once", issues: []interceptors.Issue{b, a}, max: 2, want: "a10 a30", omitted: 3},
		{name: "no facts", issues: []interceptors.Issue{{Code: "x"}}, max: 5, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lines, omitted := RelevantFacts(tc.issues, tc.max)
			if got := strings.Join(lines, " "); got != tc.want || omitted != tc.omitted {
				t.Errorf("RelevantFacts = %q, %d omitted; want %q, %d", got, omitted, tc.want, tc.omitted)
			}
		})
	}
}

func TestRevisionBodyKeepsTheClientsFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		original string
		wantErr  string
	}{
		{name: "streaming request", original: originalRequest},
		{name: "non-streaming request", original: `{"model":"m","messages":[{"role":"user","content":"x"}],"n":1}`},
		{name: "no messages", original: `{"model":"m","prompt":"x"}`, wantErr: "no \"messages\" array"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body, err := revisionBody([]byte(tc.original), "草稿 <b>&", "请修改")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			orig := gjson.Parse(tc.original)
			n := len(orig.Get("messages").Array())
			msgs := gjson.GetBytes(body, "messages").Array()
			if len(msgs) != n+2 || msgs[n].Raw != `{"role":"assistant","content":"草稿 <b>&"}` || msgs[n+1].Get("content").Str != "请修改" {
				t.Errorf("messages = %s", gjson.GetBytes(body, "messages").Raw)
			}
			for i := range n {
				if msgs[i].Raw != orig.Get("messages").Array()[i].Raw {
					t.Errorf("messages[%d] changed: %s", i, msgs[i].Raw)
				}
			}
			if s := gjson.GetBytes(body, "stream"); s.Exists() && s.Bool() {
				t.Error("stream is still true")
			}
			if gjson.GetBytes(body, "stream_options").Exists() {
				t.Error("stream_options survived")
			}
			orig.ForEach(func(k, v gjson.Result) bool {
				switch k.Str {
				case "messages", "stream", "stream_options":
				default:
					if got := gjson.GetBytes(body, k.Str).Raw; got != v.Raw {
						t.Errorf("field %s = %s, want %s byte for byte", k.Str, got, v.Raw)
					}
				}
				return true
			})
		})
	}
}
