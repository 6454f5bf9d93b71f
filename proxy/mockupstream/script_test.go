package mockupstream

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factgate/factgate/knowledge/rawjson"
)

func TestScriptErrorsNameTheProblem(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		script string
		want   []string // every piece must appear in the error
	}{
		{name: "unknown top-level key", script: "rules: []\ndefaults: {content: x}\n", want: []string{"bad.yaml:2: defaults: unknown key (did you mean default?)"}},
		{name: "unknown key in a rule", script: "rules:\n  - nmae: x\n    answer: {content: y}\n", want: []string{"bad.yaml:2: rules[0].nmae: unknown key (did you mean name?)"}},
		{name: "unknown key in match", script: "rules:\n  - match: {last_usr: x}\n    answer: {content: y}\n", want: []string{"bad.yaml:2: rules[0].match.last_usr: unknown key (did you mean last_user?)"}},
		{name: "unknown key in an answer", script: "default:\n  content: x\n  chunk-size: 3\n", want: []string{"bad.yaml:3: default.chunk-size: unknown key (did you mean chunk_size?)"}},
		{name: "unknown key in fault", script: "default:\n  fault: {status: 500, retry_after: 3}\n", want: []string{"bad.yaml:2: default.fault.retry_after: unknown key"}},
		{name: "unknown key in usage", script: "default:\n  usage: {input_tokens: 3}\n", want: []string{"default.usage.input_tokens: unknown key"}},
		{name: "bad duration", script: "default:\n  latency: soon\n", want: []string{"bad.yaml:2: default.latency: want a duration (500ms, 30s, 2m), got `soon`"}},
		{name: "not YAML", script: "rules: [\n", want: []string{"bad.yaml"}},
		{name: "bad regexp", script: "rules:\n  - name: broken\n    match: {last_user: \"(\"}\n    answer: {content: y}\n", want: []string{"bad.yaml", `rules[0] ("broken")`, "match.last_user", "missing closing )"}},
		{name: "bad header regexp", script: "rules:\n  - match: {header: {x-a: \"[\"}}\n    answer: {content: y}\n", want: []string{"rules[0]", `match.header["x-a"]`}},
		{name: "both answer and answers", script: "rules:\n  - answer: {content: a}\n    answers: [{content: b}]\n", want: []string{"rules[0]", "both answer and answers"}},
		{name: "no answer", script: "rules:\n  - match: {model: m}\n", want: []string{"rules[0]", "has no answer"}},
		{name: "content and content_file", script: "default: {content: a, content_file: b.md}\n", want: []string{"default", "both content and content_file"}},
		{name: "missing content file", script: "rules:\n  - answers: [{content: a}, {content_file: nowhere.md}]\n", want: []string{"rules[0]", "answers[1]", "content_file", "nowhere.md"}},
		{name: "two fault kinds", script: "default: {fault: {status: 500, malformed: true}}\n", want: []string{"default", "at most one of status"}},
		{name: "status out of range", script: "default: {fault: {status: 42}}\n", want: []string{"status 42 is not an HTTP status"}},
		{name: "body without status", script: "default: {fault: {body: oops}}\n", want: []string{"body and headers need a status"}},
		{name: "negative chunk size", script: "default: {chunk_size: -1}\n", want: []string{"chunk_size -1"}},
		{name: "a tool call without a name", script: "default: {tool_calls: [{function: {arguments: '{}'}}]}\n", want: []string{"default", "tool_calls[0].function.name is empty"}},
		{name: "unknown key in a tool call", script: "default: {tool_calls: [{function: {name: f, args: x}}]}\n", want: []string{"default.tool_calls[0].function.args: unknown key (known keys: name, arguments)"}},
		{name: "choices beside content", script: "default: {content: a, choices: [{content: b}]}\n", want: []string{"default", "choices is set"}},
		{name: "a choice's content file", script: "default: {choices: [{content: a}, {content_file: nowhere.md}]}\n", want: []string{"default", "choices[1]", "nowhere.md"}},
		{name: "unknown key in a choice", script: "default: {choices: [{text: a}]}\n", want: []string{"default.choices[0].text: unknown key"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "bad.yaml")
			if err := os.WriteFile(path, []byte(c.script), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadScript(path)
			if err == nil {
				t.Fatalf("LoadScript accepted:\n%s", c.script)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestScriptsThatLoad(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		path string
	}{
		{name: "the package's test script", path: "testdata/example.yaml"},
		{name: "the documented example in configs", path: "../../configs/mock-script.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := LoadScript(c.path)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Rules) == 0 || s.Dir != filepath.Dir(c.path) {
				t.Errorf("loaded %d rules with Dir %q", len(s.Rules), s.Dir)
			}
		})
	}
	empty, err := ParseScript(nil, "empty.yaml")
	if err != nil || len(empty.Rules) != 0 || empty.Default != nil {
		t.Errorf("an empty document: %+v, %v; want an empty script", empty, err)
	}
}

// TestExampleConfigScript walks the documented example's rules the way its comments
// promise, so the documentation cannot drift from the behaviour.
func TestExampleConfigScript(t *testing.T) {
	t.Parallel()
	script, err := LoadScript("../../configs/mock-script.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := startMock(t, script, Options{})
	oplog := "Mod: default\n地图: map_mp_2_rao1\n玩家: Alice (盟军); Boris (苏联)\n[操作记录]\n1:24.00 Alice 使用 SpecialPower_PackReplaceSelf [UnitId]246"
	draftBody := `{"model":"ra3-analyst","messages":[{"role":"system","content":"s"},{"role":"user","content":` + quote(oplog) + `}]}`
	_, raw := post(t, s, "/v1/chat/completions", draftBody, nil)
	draft := completionContent(t, raw)
	if !strings.Contains(draft, `"evidenceLevel": "confirmed"`) {
		t.Fatalf("the RA3 request did not get the overconfident draft: %q", draft)
	}
	revisionBody := `{"model":"ra3-analyst","messages":[{"role":"system","content":"s"},{"role":"user","content":` + quote(oplog) +
		`},{"role":"assistant","content":` + quote(draft) + `},{"role":"user","content":"1. evidence.ambiguous ..."}]}`
	_, raw = post(t, s, "/v1/chat/completions", revisionBody, nil)
	if got := completionContent(t, raw); !strings.Contains(got, `"evidenceLevel": "possible"`) {
		t.Errorf("the revision request did not get the hedged answer: %q", got)
	}
	resp, _ := post(t, s, "/v1/chat/completions", chatBody("m", "fault:429 please", false), nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("fault:429 gave %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp, _ = post(t, s, "/v1/chat/completions", chatBody("m", "sequence 1", false), nil)
	_, raw = post(t, s, "/v1/chat/completions", chatBody("m", "sequence 2", false), nil)
	if resp.StatusCode != 503 || completionContent(t, raw) != "fine now" {
		t.Errorf("the sequence gave %d then %s", resp.StatusCode, raw)
	}
}

func quote(s string) string {
	return string(rawjson.AppendString(nil, s))
}

func TestInvalidScriptInOptionsStopsStart(t *testing.T) {
	t.Parallel()
	s := New(Options{Script: &Script{Rules: []Rule{{Name: "r", Match: Match{System: "*"}, Answer: &Answer{}}}}})
	err := s.Start("127.0.0.1:0")
	if err == nil {
		_ = s.Close()
		t.Fatal("Start served an invalid script")
	}
	if !strings.Contains(err.Error(), `rules[0] ("r"): match.system`) {
		t.Errorf("error %q does not name the rule and field", err)
	}
	if s.URL() != "" {
		t.Errorf("URL %q set although nothing listens", s.URL())
	}
}
