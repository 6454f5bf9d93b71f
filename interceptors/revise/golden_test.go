package revise

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/facts"
)

var update = flag.Bool("update", false, "rewrite the expected output of the golden files in testdata/golden")

// goldenSeparator divides a golden file's input from its expected output.
const goldenSeparator = "\n----- expected revision request -----\n"

// goldenInput is the input half of a golden file: a fixture case, the system
// prompt the proxy injected, and the issues a validator reported on the case's
// answer (with the UnitIds, assets and powers whose facts they carry).
type goldenInput struct {
	Case      string         `json:"case"`
	System    string         `json:"system"`
	Threshold string         `json:"threshold"`
	FactLines int            `json:"relevant_facts_lines"`
	Issues    []goldenIssue  `json:"issues"`
	Extra     map[string]any `json:"extra_fields"`
}

type goldenIssue struct {
	interceptors.Issue
	Units  []int64  `json:"units"`
	Assets []string `json:"assets"`
	Powers []string `json:"powers"`
}

type fixtureCase struct {
	ID             string   `json:"id"`
	Replay         string   `json:"replay"`
	ReplaySegments []string `json:"replay_segments"`
	Answer         string   `json:"answer"`
	Expect         []struct {
		Code     string `json:"code"`
		Severity string `json:"severity"`
		Path     string `json:"path"`
	} `json:"expect"`
}

func loadCase(t testing.TB, name string) (fixtureCase, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "cases", name))
	if err != nil {
		t.Fatal(err)
	}
	var c fixtureCase
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	replay, err := os.ReadFile(filepath.Join("testdata", "replays", c.Replay))
	if err != nil {
		t.Fatal(err)
	}
	return c, string(replay)
}

// TestGoldenRevisionRequests renders the revision request of fixture cases and
// compares it with the expected output in the same file (go test -update rewrites
// it). The request shows every field but the messages as JSON, then each message;
// a message carried over unchanged from the original request is named, not
// repeated, after checking it is byte-identical.
func TestGoldenRevisionRequests(t *testing.T) {
	t.Parallel()
	ra3, _ := packs(t)
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.txt"))
	if len(files) == 0 {
		t.Fatal("no golden files in testdata/golden")
	}
	x, err := facts.NewExtractor(ra3.Facts)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, expected, found := strings.Cut(string(raw), goldenSeparator)
			if !found && !*update {
				t.Fatalf("%s has no %q separator", file, strings.TrimSpace(goldenSeparator))
			}
			var in goldenInput
			if err := json.Unmarshal([]byte(input), &in); err != nil {
				t.Fatalf("%s: input: %v", file, err)
			}
			fc, replay := loadCase(t, in.Case)
			ix, err := x.ExtractTexts(replay)
			if err != nil {
				t.Fatal(err)
			}
			original := []byte(`{"model":"deepseek-chat","stream":true,"stream_options":{"include_usage":true},"messages":[]}`)
			// In key order: a map's order would make the golden output vary.
			for _, k := range slices.Sorted(maps.Keys(in.Extra)) {
				original, _ = sjson.SetBytes(original, k, in.Extra[k])
			}
			original, _ = sjson.SetBytes(original, "messages.-1", map[string]string{"role": "system", "content": in.System})
			original, _ = sjson.SetBytes(original, "messages.-1", map[string]string{"role": "user", "content": replay})
			var issues []interceptors.Issue
			for _, gi := range in.Issues {
				is := gi.Issue
				is.Facts, _ = ix.Relevant(gi.Units, gi.Assets, gi.Powers, 8)
				issues = append(issues, is)
			}
			cfg := &Config{RelevantFactsLines: in.FactLines}
			if in.Threshold != "" {
				th, err := interceptors.ParseSeverity(in.Threshold)
				if err != nil {
					t.Fatal(err)
				}
				cfg.Threshold = &th
			}
			r, err := New(cfg, interceptors.Deps{Route: "golden", Pack: ra3}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			up := &fakeUpstream{replies: []reply{{content: fc.Answer}}}
			ex := &interceptors.Exchange{
				Route: "golden", Body: original, Upstream: up,
				Response:   &interceptors.Response{Status: 200, Body: completion(fc.Answer, usage(1, 1))},
				Validators: []interceptors.AnswerValidator{staticValidator(issues)},
				Issues:     issues, DraftIssues: issues, Trace: interceptors.NewTrace("golden"),
			}
			if err := r.OnResponse(context.Background(), ex); err != nil {
				t.Fatal(err)
			}
			reqs := up.requests()
			if len(reqs) == 0 {
				t.Fatal("no revision request was made")
			}
			got := describeRequest(t, original, reqs[0])
			if *update {
				if err := os.WriteFile(file, []byte(strings.TrimRight(input, "\n")+goldenSeparator+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != expected {
				t.Errorf("%s: the revision request differs (go test -update rewrites it)\n--- got ---\n%s\n--- want ---\n%s", file, got, expected)
			}
		})
	}
}

// staticValidator reports the same issues for every answer (so the loop stops on
// the repeat after one revision).
type staticValidator []interceptors.Issue

func (staticValidator) Name() string    { return "static" }
func (staticValidator) LLMBacked() bool { return false }
func (v staticValidator) ValidateAnswer(context.Context, *interceptors.Exchange, string) ([]interceptors.Issue, error) {
	return v, nil
}

// describeRequest renders a revision request readably.
func describeRequest(t *testing.T, original, req []byte) string {
	t.Helper()
	var b strings.Builder
	fields, _ := sjson.DeleteBytes(req, "messages")
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, fields, "", "  "); err != nil {
		t.Fatal(err)
	}
	b.WriteString("fields except messages:\n")
	b.Write(pretty.Bytes())
	b.WriteString("\n")
	orig := gjson.GetBytes(original, "messages").Array()
	for i, m := range gjson.GetBytes(req, "messages").Array() {
		role, content := m.Get("role").Str, m.Get("content").Str
		if i < len(orig) && orig[i].Raw == m.Raw {
			fmt.Fprintf(&b, "\n=== messages[%d] %s: unchanged from the original request (%d bytes)\n", i, role, len(content))
			continue
		}
		fmt.Fprintf(&b, "\n=== messages[%d] %s (%d bytes)\n%s\n", i, role, len(content), content)
	}
	fmt.Fprintf(&b, "\n=== size: %d bytes, %.2fx the original request's %d\n", len(req), float64(len(req))/float64(len(original)), len(original))
	return b.String()
}
