package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors/semantic/eval"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// scriptAnswer is one scripted mock answer.
type scriptAnswer struct {
	Content string         `json:"content,omitempty"`
	Usage   map[string]int `json:"usage,omitempty"`
	Fault   map[string]any `json:"fault,omitempty"`
}

var (
	evalJudgeUsage    = map[string]int{"prompt_tokens": 400, "completion_tokens": 30}
	evalRevisionUsage = map[string]int{"prompt_tokens": 1200, "completion_tokens": 60}
)

func judged(verdict string) scriptAnswer {
	b, _ := json.Marshal(map[string]string{"verdict": verdict, "explanation": "Judged from the transcript."})
	return scriptAnswer{Content: string(b), Usage: evalJudgeUsage}
}

var (
	approve   = judged("approved")
	add       = judged("combat_should_be_added")
	remove    = judged("combat_should_be_removed")
	malformed = scriptAnswer{Content: `{"verdict": "approved", "explanation": "cut`, Usage: evalJudgeUsage}
	serverErr = scriptAnswer{Fault: map[string]any{"status": 500, "body": `{"error":{"message":"judge overloaded"}}`}}
)

func revised(kind string) scriptAnswer {
	return scriptAnswer{Content: `{"kind": "` + kind + `", "title": "At the table", "summary": "What happens in the chunk, in two sentences."}`, Usage: evalRevisionUsage}
}

// chunkBehaviour scripts one chunk: the judge's answers per proposed kind (in
// order, the last repeats) and the producer's revisions.
type chunkBehaviour struct {
	judge     map[string][]scriptAnswer
	revisions []scriptAnswer
}

// evalScript renders a mock script from per-chunk behaviours, each keyed on the
// chunk's first transcript line. A request nothing scripts gets a 418, so a
// missing rule shows in the figures.
func evalScript(t *testing.T, chunks []eval.Chunk, behaviours map[string]chunkBehaviour) string {
	t.Helper()
	var judgeRules, revisionRules []any
	for _, c := range chunks {
		b, ok := behaviours[c.ID]
		if !ok {
			t.Fatalf("no behaviour for %s", c.ID)
		}
		key := regexp.QuoteMeta(strings.SplitN(c.Transcript, "\n", 2)[0])
		kinds := make([]string, 0, len(b.judge))
		for k := range b.judge {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, kind := range kinds {
			judgeRules = append(judgeRules, map[string]any{
				"name":    "judge " + c.ID + " " + kind,
				"match":   map[string]any{"response_format": "json_schema", "any_message": key, "last_user": `(?s)## Proposed kind\s+` + kind + `\s*$`},
				"answers": b.judge[kind],
			})
		}
		if len(b.revisions) > 0 {
			revisionRules = append(revisionRules, map[string]any{
				"name":    "revision " + c.ID,
				"match":   map[string]any{"has_assistant": true, "any_message": key},
				"answers": b.revisions,
			})
		}
	}
	out, err := json.Marshal(map[string]any{
		"rules":   append(judgeRules, revisionRules...),
		"default": map[string]any{"fault": map[string]any{"status": 418, "body": `{"error":{"message":"unscripted request"}}`}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func startMock(t *testing.T, script string) *mockupstream.Server {
	t.Helper()
	sc, err := mockupstream.ParseScript([]byte(script), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	m := mockupstream.New(mockupstream.Options{Script: sc, Record: true})
	if err := m.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// dndEvaluation is the dnd pack's combat validator's label mapping and set.
func dndEvaluation(t *testing.T) *knowledge.EvaluationSpec {
	t.Helper()
	reg, err := knowledge.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := eval.Spec(reg.Pack("dnd"), "combat")
	if err != nil {
		t.Fatal(err)
	}
	return spec.Evaluation
}

func builtinChunks(t *testing.T) []eval.Chunk {
	t.Helper()
	chunks, err := eval.LoadSet(dndEvaluation(t).SetFS, dndEvaluation(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return chunks
}

// The figures of a run over the built-in set with a judge and producer scripted so
// that every figure is exercised; the expected values are counted by hand in the
// comments.
func TestEvalFiguresMatchAHandCount(t *testing.T) {
	t.Parallel()
	chunks := builtinChunks(t)
	if len(chunks) != 14 {
		t.Fatalf("the built-in set has %d chunks", len(chunks))
	}
	type J = map[string][]scriptAnswer
	R := func(kinds ...string) []scriptAnswer {
		var out []scriptAnswer
		for _, k := range kinds {
			out = append(out, revised(k))
		}
		return out
	}
	// Cases run in order: each chunk's correct proposal, then its wrong one (the
	// combat status flipped). The judge's sequences rely on that order.
	behaviours := map[string]chunkBehaviour{
		// correct combat: approved (1 call); wrong narrative: rejected, revised to
		// combat, approved (2 calls, 1 revision) → corrected.
		"d01_goblin_ambush": {judge: J{"combat": {approve}, "narrative": {add}}, revisions: R("combat")},
		// wrong narrative approved: false acceptance (1 call).
		"d02_bridge_duel": {judge: J{"combat": {approve}, "narrative": {approve}}},
		// correct: malformed, then approved on the retry (2 calls); wrong: rejected,
		// revised, approved (2 calls, 1 revision) → corrected.
		"d03_setup_then_fight": {judge: J{"combat": {malformed, approve}, "narrative": {add}}, revisions: R("combat")},
		"d04_fight_then_loot":  {judge: J{"combat": {approve}, "narrative": {add}}, revisions: R("combat")},
		// correct combat falsely rejected, revised to combat, rejected again: the
		// revision stops, the draft (combat) goes out — no regression (2 calls, 1
		// revision); wrong: rejected, revised, approved → corrected (2 calls, 1 revision).
		"d05_rules_pause_midfight": {judge: J{"combat": {remove, remove, approve}, "narrative": {add}}, revisions: R("combat")},
		// wrong: rejected, but the revision keeps narrative and is rejected again →
		// not corrected (2 calls, 1 revision).
		"d06_two_waves":     {judge: J{"combat": {approve}, "narrative": {add}}, revisions: R("narrative")},
		"d07_plan_the_raid": {judge: J{"narrative": {approve}, "combat": {remove}}, revisions: R("narrative")},
		// wrong combat approved: false acceptance (1 call).
		"d08_tavern_standoff": {judge: J{"narrative": {approve}, "combat": {approve}}},
		// correct: malformed twice → execution failure (2 calls); wrong: rejected,
		// revised, approved on the narrative rule's third answer → corrected.
		"d09_after_the_battle": {judge: J{"narrative": {malformed, malformed, approve}, "combat": {remove}}, revisions: R("narrative")},
		// wrong combat: "add combat" to combat twice (inconsistent) → execution failure (2 calls).
		"d10_short_rest":    {judge: J{"narrative": {approve}, "combat": {add}}},
		"d11_session_recap": {judge: J{"recap": {approve}, "combat": {remove}}, revisions: R("recap")},
		// correct narrative falsely rejected, revised to combat, approved → a
		// regression (2 calls, 1 revision); wrong combat: rejected, revised to
		// narrative, approved → corrected (2 calls, 1 revision).
		"d12_old_war_story": {judge: J{"narrative": {add, approve}, "combat": {approve, remove}}, revisions: R("combat", "narrative")},
		// wrong combat: the judge answers 500 twice → execution failure (2 calls, no tokens).
		"d13_grapple_rules_debate": {judge: J{"meta": {approve}, "combat": {serverErr}}},
		// wrong combat: rejected, revised to narrative (right status, not the
		// labelled meta), approved → corrected, not exactly.
		"d14_build_talk": {judge: J{"meta": {approve}, "combat": {remove}, "narrative": {approve}}, revisions: R("narrative")},
	}
	mock := startMock(t, evalScript(t, chunks, behaviours))
	code, out, errOut := runMain(t, "eval", "--base-url", mock.URL(), "--model", "judge-model", "--key-env", "FACTGATE_EVAL_TEST_UNSET_KEY", "--json")
	if code != evalDone {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "FACTGATE_EVAL_TEST_UNSET_KEY is not set") {
		t.Errorf("no warning about the missing key: %s", errOut)
	}
	var rep eval.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	rates := []struct {
		name string
		got  eval.Rate
		want [2]int
	}{
		{"false acceptance", rep.FalseAcceptance, [2]int{2, 14}},     // d02, d08
		{"false rejection", rep.FalseRejection, [2]int{2, 14}},       // d05, d12
		{"execution failures", rep.ExecutionFailures, [2]int{3, 28}}, // d09 correct, d10 wrong, d13 wrong
		{"corrections", rep.Corrections, [2]int{9, 10}},              // of the 10 rejected wrong proposals, all but d06
		{"regressions", rep.Regressions, [2]int{1, 14}},              // d12 correct
	}
	for _, r := range rates {
		if r.got.Count != r.want[0] || r.got.Of != r.want[1] {
			t.Errorf("%s = %d of %d, want %d of %d", r.name, r.got.Count, r.got.Of, r.want[0], r.want[1])
		}
	}
	if rep.ExactCorrections != 8 { // all but d14 (narrative for meta)
		t.Errorf("exact corrections %d, want 8", rep.ExactCorrections)
	}
	if rep.FalseAcceptance.Rate != 0.1429 || rep.ExecutionFailures.Rate != 0.1071 {
		t.Errorf("rates %v, %v", rep.FalseAcceptance.Rate, rep.ExecutionFailures.Rate)
	}
	// Judge calls: 18 for the correct proposals, 26 for the wrong ones; revisions:
	// d05 and d12 correct, 10 wrong ones.
	if c := rep.AddedCalls; c.Judge != 44 || c.Revision != 12 || c.Total != 56 || c.PerCase != 2 {
		t.Errorf("added calls %+v, want judge 44, revision 12, total 56, 2 per case", c)
	}
	// 42 judge calls answered with usage (d13's two 500s have none), 12 revisions.
	if tk := rep.Tokens; tk.Judge.PromptTokens != 16800 || tk.Judge.CompletionTokens != 1260 || tk.Judge.TotalTokens != 18060 ||
		tk.Revision.PromptTokens != 14400 || tk.Revision.CompletionTokens != 720 || tk.Revision.TotalTokens != 15120 || tk.PerCase != 1185 {
		t.Errorf("tokens %+v", tk)
	}
	if l := rep.JudgeLatency; l.N != 44 || l.P50 <= 0 || l.P95 < l.P50 {
		t.Errorf("judge latency %+v", l)
	}
	if l := rep.AddedLatency; l.N != 28 || l.P95 < l.P50 {
		t.Errorf("added latency %+v", l)
	}
	if rep.Errors != 0 || len(rep.Results) != 28 {
		t.Fatalf("errors %d, %d results", rep.Errors, len(rep.Results))
	}
	byCase := map[string]eval.Result{}
	for _, r := range rep.Results {
		byCase[r.Chunk+"/"+r.Proposal] = r
	}
	for id, want := range map[string]string{
		"d01_goblin_ambush/wrong":          "narrative rejected combat corrected",
		"d05_rules_pause_midfight/correct": "combat rejected combat",
		"d06_two_waves/wrong":              "narrative rejected narrative",
		"d09_after_the_battle/correct":     "narrative failed narrative",
		"d12_old_war_story/correct":        "narrative rejected combat regressed",
		"d14_build_talk/wrong":             "combat rejected narrative corrected",
	} {
		r := byCase[id]
		got := r.Proposed + " " + r.Draft + " " + r.FinalValue
		if r.Corrected {
			got += " corrected"
		}
		if r.Regressed {
			got += " regressed"
		}
		if got != want {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
	}

	// Nothing the provider got names a case, a chunk id or a reason code.
	for _, r := range mock.Requests() {
		for _, never := range []string{"d01_goblin_ambush", "/wrong", "/correct", "semantic.", eval.CaseHeader} {
			if strings.Contains(string(r.Body), never) || r.Header.Get(eval.CaseHeader) != "" {
				t.Fatalf("a provider request carries %q", never)
			}
		}
	}

	// The table shows the same figures.
	var table bytes.Buffer
	writeEvalReport(&table, &rep)
	for _, want := range []string{
		"14 chunks × 2 proposals = 28 cases", "judge: judge-model on upstream provider",
		"false acceptance    2 of 14", "false rejection     2 of 14", "execution failures  3 of 28",
		"corrections         9 of 10", "(8 with the labelled kind)", "regressions         1 of 14",
		"added calls         56", "judge 44, revision 12", "judge 18060 (prompt 16800, completion 1260), revision 15120",
		"d12_old_war_story", "narrative: rejected → combat (regressed)", "narrative: rejected (not corrected)",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
}

// --config runs a configured route: its own upstreams, judge profile and revision.
func TestEvalWithAConfiguredRoute(t *testing.T) {
	t.Parallel()
	// Names no other test uses: this test runs in parallel.
	os.Setenv("FACTGATE_EVAL_TEST_WRITER_KEY", "sk-eval-writer")
	os.Setenv("FACTGATE_EVAL_TEST_JUDGE_KEY", "sk-eval-judge")
	all := builtinChunks(t)
	var chunks []eval.Chunk
	dir := t.TempDir()
	for _, c := range all {
		if c.ID != "d01_goblin_ambush" && c.ID != "d07_plan_the_raid" {
			continue
		}
		chunks = append(chunks, c)
		b, err := fs.ReadFile(dndEvaluation(t).SetFS, c.File)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.File), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	producer := startMock(t, evalScript(t, chunks, map[string]chunkBehaviour{
		"d01_goblin_ambush": {revisions: []scriptAnswer{revised("combat")}},
		"d07_plan_the_raid": {revisions: []scriptAnswer{revised("narrative")}},
	}))
	judge := startMock(t, evalScript(t, chunks, map[string]chunkBehaviour{
		"d01_goblin_ambush": {judge: map[string][]scriptAnswer{"combat": {approve}, "narrative": {add}}},
		"d07_plan_the_raid": {judge: map[string][]scriptAnswer{"narrative": {approve}, "combat": {remove}}},
	}))
	config := filepath.Join(dir, "factgate.yaml")
	if err := os.WriteFile(config, []byte(`
auth:
  mode: keys
  keys: [{name: app, key_env: FACTGATE_KEY_EVAL_TEST_APP}]
upstreams:
  writer: {base_url: "`+producer.URL()+`", api_key_env: FACTGATE_EVAL_TEST_WRITER_KEY}
  judges: {base_url: "`+judge.URL()+`", api_key_env: FACTGATE_EVAL_TEST_JUDGE_KEY}
routes:
  - name: scenes
    models: [scene-writer]
    upstream: writer
    pack: dnd
    inject: {}
    validate: {}
    semantic: {validators: [combat], upstream: judges, model: judge-model, failure_policy: closed}
    revise: {max_revisions: 1}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, "eval", "--config", config, "--route", "scenes", "--set", dir, "--concurrency", "4")
	if code != evalDone {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"2 chunks × 2 proposals = 4 cases; route scenes, validators combat",
		"judge: judge-model on upstream judges; producer: scene-writer on upstream writer",
		"false acceptance    0 of 2", "false rejection     0 of 2", "corrections         2 of 2",
		"added calls         8", "judge 6, revision 2", // 1 judge call per correct proposal, 2 and a revision per wrong one
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	// Each upstream gets its own key, injected by the proxy.
	for _, r := range judge.Requests() {
		if got := r.Header.Get("Authorization"); got != "Bearer sk-eval-judge" {
			t.Fatalf("a judge request with Authorization %q", got)
		}
		if !strings.Contains(string(r.Body), `"model":"judge-model"`) {
			t.Fatalf("a judge request for another model: %s", r.Body)
		}
	}
	// The route forwards the client's model: the evaluation sends the route's alias.
	for _, r := range producer.Requests() {
		if got := r.Header.Get("Authorization"); got != "Bearer sk-eval-writer" {
			t.Fatalf("a producer request with Authorization %q", got)
		}
		if strings.Contains(string(r.Body), "json_schema") {
			t.Fatal("a judge request went to the producer's upstream")
		}
		if !strings.Contains(string(r.Body), `"model":"scene-writer"`) {
			t.Fatalf("a producer request for another model: %.200s", r.Body)
		}
	}
}

func TestEvalUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no mode", nil, "Usage: factgate eval"},
		{"both modes", []string{"--config", "x.yaml", "--base-url", "http://x/v1"}, "Usage: factgate eval"},
		{"config without route", []string{"--config", "x.yaml"}, "--config needs --route"},
		{"base URL without model", []string{"--base-url", "http://127.0.0.1:9/v1"}, "--base-url needs --model"},
		{"concurrency", []string{"--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--concurrency", "0"}, "--concurrency 0"},
		{"an unknown route", []string{"--config", "../../configs/dnd.yaml", "--route", "nope"}, `no route named "nope"`},
		{"a route without semantic validators", []string{"--config", "../../configs/factgate.yaml", "--route", "ra3-analyst"}, "has no semantic block"},
		{"an unknown pack", []string{"--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--pack", "chess"}, `no built-in pack "chess"`},
		{"an empty set", []string{"--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--set", dir}, "no *.json chunk files"},
		{"a key outside FACTGATE_*", []string{"--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--key-env", "OPENAI_API_KEY"}, "--key-env OPENAI_API_KEY: provider keys come from FACTGATE_* environment variables"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runMain(t, append([]string{"eval"}, tc.args...)...)
			if code != evalUsage || !strings.Contains(out+errOut, tc.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s%s", code, evalUsage, tc.want, out, errOut)
			}
		})
	}
}
