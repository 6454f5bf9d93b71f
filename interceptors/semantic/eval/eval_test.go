package eval

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/semantic"
	"github.com/factgate/factgate/knowledge"
)

func dndPack(t *testing.T) *knowledge.Pack {
	t.Helper()
	reg, err := knowledge.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return reg.Pack("dnd")
}

func combatSpec(t *testing.T) *knowledge.SemanticSpec {
	t.Helper()
	spec, err := Spec(dndPack(t), "combat")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestTheDnDPackShipsItsLabelledSet(t *testing.T) {
	t.Parallel()
	spec := combatSpec(t)
	chunks, err := LoadSet(spec.Evaluation.SetFS, spec.Evaluation, dndPack(t).Answer.Enums["kind"])
	if err != nil {
		t.Fatal(err)
	}
	combat := 0
	for _, c := range chunks {
		if c.Label {
			combat++
		}
	}
	if len(chunks) != 14 || combat != 6 || chunks[0].ID != "d01_goblin_ambush" || !chunks[0].Label || chunks[0].Correct != "combat" {
		t.Fatalf("%d chunks, %d with combat, first %+v", len(chunks), combat, chunks[0])
	}
	if spec.Evaluation.WrongFor(true) != "narrative" || spec.Evaluation.WrongFor(false) != "combat" || spec.Evaluation.Name() != "combat" {
		t.Fatalf("the label mapping: %+v", spec.Evaluation)
	}
}

func TestSpecNeedsAnEvaluationBlock(t *testing.T) {
	t.Parallel()
	pack := *dndPack(t)
	pack.Semantic = []knowledge.SemanticSpec{{Name: "combat"}}
	if _, err := Spec(&pack, "combat"); err == nil || !strings.Contains(err.Error(), "no evaluation block") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Spec(dndPack(t), "tone"); err == nil || !strings.Contains(err.Error(), `no semantic validator "tone" (have combat)`) {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadSetIsStrict(t *testing.T) {
	t.Parallel()
	spec := combatSpec(t).Evaluation
	enum := dndPack(t).Answer.Enums["kind"]
	good := `{"id": "a", "category": "c", "active_combat": true, "correct_kind": "combat", "transcript": "DM: Fight.\n", "note": ""}`
	cases := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"an unknown field", map[string]string{"a.json": strings.Replace(good, `"note"`, `"notes"`, 1)}, `a.json: unknown field "notes"`},
		{"no id", map[string]string{"a.json": strings.Replace(good, `"id": "a"`, `"id": ""`, 1)}, "a.json: no id"},
		{"an empty transcript", map[string]string{"a.json": strings.Replace(good, `"DM: Fight.\n"`, `" "`, 1)}, "empty transcript"},
		{"no correct value", map[string]string{"a.json": strings.Replace(good, `"combat"`, `""`, 1)}, "a.json (a): no correct_kind"},
		{"a label contradicting itself", map[string]string{"a.json": strings.Replace(good, `"active_combat": true`, `"active_combat": false`, 1)}, `correct_kind "combat" contradicts active_combat false`},
		{"a label that is not a boolean", map[string]string{"a.json": strings.Replace(good, `"active_combat": true`, `"active_combat": "yes"`, 1)}, "field active_combat: want true or false"},
		{"a value outside the answer's enum", map[string]string{"a.json": strings.Replace(good, `"combat"`, `"battle"`, 1)}, `correct_kind "battle" is not one of the answer's values`},
		{"a duplicate id", map[string]string{"a.json": good, "b.json": good}, `b.json: id "a" is also used by a.json`},
		{"no chunks", map[string]string{"readme.md": "x"}, "no *.json chunk files"},
		{"not an object", map[string]string{"a.json": `[` + good + `]`}, "a.json: json: cannot unmarshal array"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fsys := fstest.MapFS{}
			for name, text := range tc.files {
				fsys[name] = &fstest.MapFile{Data: []byte(text)}
			}
			_, err := LoadSet(fs.FS(fsys), spec, enum)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// headers is an interceptors.HeaderReader over an http.Header.
type headers http.Header

func (h headers) Peek(key string) []byte { return []byte(http.Header(h).Get(key)) }

func TestTheDraftStageAnswersTheCase(t *testing.T) {
	t.Parallel()
	stage := &draftStage{drafts: map[string]string{"d01/wrong": `{"kind": "narrative"}`}}
	ex := &interceptors.Exchange{Body: []byte(`{"model":"deepseek-chat","messages":[]}`), Header: headers{CaseHeader: {"d01/wrong"}}}
	if err := stage.OnRequest(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	if !ex.Response.OK() || ex.Response.Content() != `{"kind": "narrative"}` || gjson.GetBytes(ex.Response.Body, "model").Str != "deepseek-chat" ||
		gjson.GetBytes(ex.Response.Body, "choices.0.message.role").Str != "assistant" {
		t.Fatalf("response %d %s", ex.Response.Status, ex.Response.Body)
	}
	ex = &interceptors.Exchange{Body: []byte(`{}`), Header: headers{CaseHeader: {"d99/correct"}}}
	err := stage.OnRequest(context.Background(), ex)
	if e := interceptors.AsError(err); e == nil || e.Status != 400 || ex.Response != nil {
		t.Fatalf("an unknown case: %v, response %v", err, ex.Response)
	}
}

func TestProposalAnswerFollowsTheShape(t *testing.T) {
	t.Parallel()
	shape := &knowledge.AnswerShape{Fields: map[string]string{"kind": "string", "score": "number", "ok": "boolean", "a.b": "string"}}
	got, err := proposalAnswer(shape, "kind", "combat")
	if err != nil {
		t.Fatal(err)
	}
	r := gjson.Parse(got)
	if r.Get("kind").Str != "combat" || r.Get("score").Type != gjson.Number || r.Get("ok").Type != gjson.False || !r.Get(gjson.Escape("a.b")).Exists() {
		t.Fatalf("answer %s", got)
	}
}

func TestMeasureReadsTheTrace(t *testing.T) {
	t.Parallel()
	u := func(p, c int) interceptors.Usage {
		return interceptors.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
	}
	d := func(ms int) units.Millis { return units.Millis(time.Duration(ms) * time.Millisecond) }
	tr := &interceptors.Trace{
		Attempts: []interceptors.Attempt{
			{Kind: "draft", Duration: d(900), Usage: u(1000, 50)},
			{Kind: "revision", Duration: d(300), Usage: u(1200, 60)},
			{Kind: "revision", Duration: d(100), Error: "the revision budget of 2s was spent waiting for the upstream"},
		},
		Calls: []interceptors.Call{
			{Kind: "judge", Result: semantic.ResultFailed, Duration: d(20)},
			{Kind: "judge", Result: semantic.ResultOK, Duration: d(40), Usage: u(400, 30)},
			{Kind: "judge", Result: semantic.ResultBudgetExhausted, Duration: d(60), Usage: u(400, 0)},
		},
	}
	var r Result
	measure(tr, &r)
	if r.JudgeCalls != 3 || r.RevisionCalls != 2 || r.JudgeUsage != u(800, 30) || r.RevisionUsage != u(1200, 60) || r.AddedMs != 520 || len(r.judgeDurations) != 3 {
		t.Fatalf("measured %+v", r)
	}
}

// The figures of a hand-made set of results.
func TestSummarizeCountsByHand(t *testing.T) {
	t.Parallel()
	judge := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i+1) * 10 * time.Millisecond
		}
		return out
	}
	rep := &Report{Results: []Result{
		{Proposal: ProposalCorrect, Draft: DraftApproved, JudgeCalls: 1, AddedMs: 10, judgeDurations: judge(1)},
		{Proposal: ProposalWrong, Draft: DraftRejected, Corrected: true, Exact: true, JudgeCalls: 2, RevisionCalls: 1, AddedMs: 40, judgeDurations: judge(2),
			JudgeUsage: interceptors.Usage{TotalTokens: 860}, RevisionUsage: interceptors.Usage{TotalTokens: 1260}},
		{Proposal: ProposalCorrect, Draft: DraftRejected, Regressed: true, JudgeCalls: 2, RevisionCalls: 1, AddedMs: 30, judgeDurations: judge(2)},
		{Proposal: ProposalWrong, Draft: DraftApproved, JudgeCalls: 1, AddedMs: 20, judgeDurations: judge(1)},
		{Proposal: ProposalCorrect, Draft: DraftFailed, JudgeCalls: 2, AddedMs: 50, judgeDurations: judge(2)},
		{Proposal: ProposalWrong, Draft: DraftError, Error: "status 502"},
	}}
	summarize(rep)
	for _, c := range []struct {
		name string
		got  Rate
		want Rate
	}{
		{"false acceptance", rep.FalseAcceptance, Rate{1, 3, 0.3333}},
		{"false rejection", rep.FalseRejection, Rate{1, 3, 0.3333}},
		{"execution failures", rep.ExecutionFailures, Rate{1, 6, 0.1667}},
		{"corrections", rep.Corrections, Rate{1, 1, 1}},
		{"regressions", rep.Regressions, Rate{1, 3, 0.3333}},
	} {
		if c.got != c.want {
			t.Errorf("%s = %+v, want %+v", c.name, c.got, c.want)
		}
	}
	if rep.Errors != 1 || rep.ExactCorrections != 1 || rep.AddedCalls.Judge != 8 || rep.AddedCalls.Revision != 2 || rep.AddedCalls.PerCase != 1.67 || rep.Tokens.PerCase != 353.3 {
		t.Errorf("errors %d, exact %d, calls %+v, tokens per case %v", rep.Errors, rep.ExactCorrections, rep.AddedCalls, rep.Tokens.PerCase)
	}
	// Judge calls: 10,10,20,10,20,10,10,20 ms → p50 10ms, p95 20ms; added per case
	// 0,10,20,30,40,50 → p50 20, p95 50.
	if l := rep.JudgeLatency; l != (Latency{P50: 10, P95: 20, N: 8}) {
		t.Errorf("judge latency %+v", l)
	}
	if l := rep.AddedLatency; l != (Latency{P50: 20, P95: 50, N: 6}) {
		t.Errorf("added latency %+v", l)
	}
}

// fakeProxy plays the proxy of a run: it answers a case with its draft (from the
// engine's stage, as the route's innermost stage would) or with the revision a
// script names, and stores the trace the script gives.
type fakeProxy struct {
	srv    *httptest.Server
	stage  interceptors.RequestPhase
	script map[string]fakeCase // by case id

	mu     sync.Mutex
	traces map[string][]byte
	closed bool
}

// fakeCase is what the route did with one case.
type fakeCase struct {
	draftIssues []interceptors.Issue
	final       string // the final answer's kind ("": the draft)
	finalIssues []interceptors.Issue
	status      int // 0: 200
	noTrace     bool
}

func startFake(t *testing.T, script map[string]fakeCase) (*fakeProxy, func(interceptors.Interceptor) (Proxy, error)) {
	f := &fakeProxy{script: script, traces: map[string][]byte{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f, func(stage interceptors.Interceptor) (Proxy, error) {
		f.stage = stage.(interceptors.RequestPhase)
		return f, nil
	}
}

func (f *fakeProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ex := &interceptors.Exchange{Body: body, Header: headers(r.Header)}
	if err := f.stage.OnRequest(r.Context(), ex); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	c := f.script[r.Header.Get(CaseHeader)]
	tr := interceptors.NewTrace("scenes")
	tr.Attempts = []interceptors.Attempt{{Kind: "draft", Issues: c.draftIssues}}
	tr.Calls = []interceptors.Call{{Kind: "judge", Result: semantic.ResultOK, Duration: units.Millis(time.Millisecond)}}
	answer := ex.Response.Content()
	if c.final != "" {
		answer = `{"kind": "` + c.final + `", "title": "t", "summary": "s"}`
		tr.Attempts = append(tr.Attempts, interceptors.Attempt{Kind: "revision", Issues: c.finalIssues})
		tr.Final = &interceptors.FinalOutcome{Attempt: 1}
	}
	if !c.noTrace {
		b, _ := tr.MarshalJSON()
		f.mu.Lock()
		f.traces[tr.ID] = b
		f.mu.Unlock()
	}
	w.Header().Set("X-Factgate-Trace-Id", tr.ID)
	if c.status != 0 {
		w.WriteHeader(c.status)
		_, _ = w.Write([]byte(`{"error":{"message":"the judge could not check it","code":"` + semantic.ErrorCode + `"}}`))
		return
	}
	out, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"message": map[string]string{"role": "assistant", "content": answer}}}})
	_, _ = w.Write(out)
}

func (f *fakeProxy) URL() string { return f.srv.URL }

func (f *fakeProxy) LoadTrace(_ context.Context, id string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.traces[id]
	return b, ok, nil
}

func (f *fakeProxy) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// Run proposes each chunk's labelled value and its wrong one through the proxy
// and classifies each case by the chunk's label.
func TestRunClassifiesEachCase(t *testing.T) {
	t.Parallel()
	rejected := []interceptors.Issue{{Code: semantic.CodeRejected, Severity: interceptors.Contradiction}}
	failed := []interceptors.Issue{{Code: semantic.CodeFailed, Severity: interceptors.Fatal}}
	chunks := []Chunk{
		{ID: "fight", Label: true, Correct: "combat", Transcript: "DM: Roll initiative."},
		{ID: "talk", Label: false, Correct: "meta", Transcript: "Tom: How does grappling work?"},
	}
	fake, start := startFake(t, map[string]fakeCase{
		"fight/correct": {},
		// Rejected, revised to combat, accepted: corrected, exactly.
		"fight/wrong": {draftIssues: rejected, final: "combat"},
		// Falsely rejected and revised to combat: a regression.
		"talk/correct": {draftIssues: rejected, final: "combat"},
		// Closed failure policy: the request fails, not an error of the evaluation.
		"talk/wrong": {draftIssues: failed, status: 502},
	})
	rep, err := Run(context.Background(), Options{
		Pack: dndPack(t), Validators: []string{"combat"}, Route: "scenes", Model: "scene-writer",
		Chunks: chunks, Set: "test", Concurrency: 2, Timeout: 10 * time.Second, Start: start,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rep.Results {
		s := r.Proposed + " " + r.Draft + " " + r.FinalValue
		if r.Corrected {
			s += " corrected"
		}
		if r.Exact {
			s += " exact"
		}
		if r.Regressed {
			s += " regressed"
		}
		if r.Error != "" {
			s += " error"
		}
		got[r.Chunk+"/"+r.Proposal] = s
	}
	want := map[string]string{
		"fight/correct": "combat approved combat",
		"fight/wrong":   "narrative rejected combat corrected exact",
		"talk/correct":  "meta rejected combat regressed",
		"talk/wrong":    "combat failed ",
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %q, want %q", id, got[id], w)
		}
	}
	if rep.Errors != 0 || rep.Corrections != (Rate{1, 1, 1}) || rep.Regressions != (Rate{1, 2, 0.5}) || rep.ExecutionFailures != (Rate{1, 4, 0.25}) ||
		rep.LabelField != "active_combat" || rep.LabelName != "combat" || rep.ProposedField != "kind" || rep.AddedCalls.Judge != 4 {
		t.Fatalf("report %+v", rep)
	}
	if !fake.closed {
		t.Fatal("Run did not close the proxy")
	}
}

// A case whose trace never appears is listed with its error; the run goes on.
func TestRunListsACaseWithoutATrace(t *testing.T) {
	t.Parallel()
	_, start := startFake(t, map[string]fakeCase{"fight/wrong": {noTrace: true}})
	rep, err := Run(context.Background(), Options{
		Pack: dndPack(t), Validators: []string{"combat"}, Model: "scene-writer",
		Chunks: []Chunk{{ID: "fight", Label: true, Correct: "combat", Transcript: "DM: Roll initiative."}},
		// The case's bound ends the wait for the missing trace.
		Start: start, Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors != 1 || rep.Results[1].Draft != DraftError || !strings.Contains(rep.Results[1].Error, "was not stored") || rep.Results[0].Error != "" {
		t.Fatalf("results %+v", rep.Results)
	}
}
