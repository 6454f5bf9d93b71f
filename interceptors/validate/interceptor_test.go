package validate

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/knowledge"
)

func newStage(tb testing.TB, cfg Config) (*Validate, *prometheus.Registry) {
	tb.Helper()
	lib, err := knowledge.NewLibrary(builtin(tb), knowledge.LibraryOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = lib.Close() })
	reg := prometheus.NewRegistry()
	v, err := New(cfg, interceptors.Deps{Route: "analyst", Pack: ra3Pack(tb), Library: lib, Metrics: reg})
	if err != nil {
		tb.Fatal(err)
	}
	return v, reg
}

// chatRequest is a chat completion request whose user message is text.
func chatRequest(text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"model":    "ra3-analyst",
		"messages": []map[string]string{{"role": "system", "content": "你是分析师。"}, {"role": "user", "content": text}},
	})
	return b
}

// completion is an upstream answer with content.
func completion(content string) *interceptors.Response {
	b, _ := json.Marshal(map[string]any{
		"id": "c1", "object": "chat.completion", "x_provider_field": 7,
		"choices": []map[string]any{{"index": 0, "message": map[string]string{"role": "assistant", "content": content}, "finish_reason": "stop"}},
		"usage":   map[string]int{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
	})
	return &interceptors.Response{Status: 200, Body: b}
}

func newExchange(text string) *interceptors.Exchange {
	body := chatRequest(text)
	return &interceptors.Exchange{Route: "analyst", Original: body, Body: append([]byte(nil), body...), Trace: interceptors.NewTrace("analyst")}
}

// counted reads factgate_validation_issues_total for code and severity on the
// route "analyst".
func counted(tb testing.TB, reg *prometheus.Registry, code, severity string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "factgate_validation_issues_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["code"] == code && labels["severity"] == severity && labels["route"] == "analyst" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

var c03Answer = answer(unitClaims(unit("200", "Alice", "AlliedMiner", "highly likely", "power|1:30|SpecialPower_PackReplaceSelf|200")))

func TestStageValidatesTheDraft(t *testing.T) {
	t.Parallel()
	v, reg := newStage(t, Config{})
	ctx := context.Background()
	ex := newExchange(testLog)
	if err := v.OnRequest(ctx, ex); err != nil {
		t.Fatal(err)
	}
	if len(ex.Validators) != 1 || ex.Validators[0].LLMBacked() {
		t.Fatalf("validators %v: want the deterministic one", ex.Validators)
	}
	ex.Response = completion(c03Answer)
	before := string(ex.Response.Body)
	if err := v.OnResponse(ctx, ex); err != nil {
		t.Fatal(err)
	}
	want := []string{"power.not_used|Contradiction|unitClaims[0].evidence[0]"}
	if got := keys(ex.Issues, interceptors.Info); !slices.Equal(got, want) {
		t.Fatalf("issues %v, want %v", got, want)
	}
	if got := keys(ex.DraftIssues, interceptors.Info); !slices.Equal(got, want) {
		t.Fatalf("draft issues %v", got)
	}
	if string(ex.Response.Body) != before {
		t.Fatal("the answer changed; until the revision exists it passes unchanged")
	}
	var hdr string
	for _, h := range ex.ResponseHeaders {
		if h[0] == HeaderIssues {
			hdr = h[1]
		}
	}
	if hdr != "draft=C1;final=C1;delivered=C1" {
		t.Fatalf("%s: %q", HeaderIssues, hdr)
	}
	raw, _ := json.Marshal(ex.Trace)
	var tr struct {
		KnowledgeSet string                     `json:"knowledge_set"`
		FactKey      string                     `json:"fact_key"`
		Attempts     []interceptors.Attempt     `json:"attempts"`
		Timings      map[string]json.RawMessage `json:"timings"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.Attempts) != 1 || tr.Attempts[0].Kind != "draft" || tr.Attempts[0].Counts != "C1" ||
		tr.Attempts[0].Usage.TotalTokens != 120 || len(tr.Attempts[0].Issues) != 1 || tr.Attempts[0].Content != c03Answer {
		t.Fatalf("trace attempts %s", raw)
	}
	if _, ok := tr.Timings["validate"]; !ok || tr.KnowledgeSet != "ra3" || tr.FactKey == "" {
		t.Fatalf("trace %s", raw)
	}
	if n := counted(t, reg, "power.not_used", "Contradiction"); n != 1 {
		t.Fatalf("factgate_validation_issues_total = %v, want 1", n)
	}

	// A revision step validates each attempt through the same registered validator.
	is, errs := ex.ValidateAnswer(ctx, answer(unitClaims(unit("200", "Alice", "AlliedMiner", "possible", "power|1:10|SpecialPower_UnpackReplaceSelf|200"))))
	if len(is) != 0 || len(errs) != 0 {
		t.Fatalf("revised answer: %v %v", keys(is, interceptors.Info), errs)
	}
}

func TestStageOnAndOff(t *testing.T) {
	t.Parallel()
	on, off := true, false
	for _, tc := range []struct {
		name     string
		cfg      Config
		override *bool
		status   int
		checked  bool
	}{
		{"on by default", Config{}, nil, 200, true},
		{"the variant turns it off", Config{}, &off, 200, false},
		{"off in the route", Config{Enabled: &off}, nil, 200, false},
		{"the variant turns it on", Config{Enabled: &off}, &on, 200, true},
		{"an upstream error is not validated", Config{}, nil, 503, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, reg := newStage(t, tc.cfg)
			ex := newExchange(testLog)
			ex.Overrides.Validate = tc.override
			if err := v.OnRequest(context.Background(), ex); err != nil {
				t.Fatal(err)
			}
			ex.Response = completion(c03Answer)
			ex.Response.Status = tc.status
			if err := v.OnResponse(context.Background(), ex); err != nil {
				t.Fatal(err)
			}
			if checked := len(ex.Issues) > 0; checked != tc.checked {
				t.Fatalf("checked = %v (issues %v), want %v", checked, keys(ex.Issues, interceptors.Info), tc.checked)
			}
			if hasHeader := len(ex.ResponseHeaders) > 0; hasHeader != tc.checked {
				t.Fatalf("headers %v", ex.ResponseHeaders)
			}
			if n := counted(t, reg, "power.not_used", "Contradiction"); (n == 1) != tc.checked {
				t.Fatalf("counted %v", n)
			}
		})
	}
}

// brokenValidator is another stage's validator that cannot run.
type brokenValidator struct{}

func (brokenValidator) Name() string    { return "broken" }
func (brokenValidator) LLMBacked() bool { return true }
func (brokenValidator) ValidateAnswer(context.Context, *interceptors.Exchange, string) ([]interceptors.Issue, error) {
	return nil, errors.New("judge model timed out")
}

func TestStageFailsOpen(t *testing.T) {
	t.Parallel()
	v, _ := newStage(t, Config{})
	ex := newExchange(testLog)
	if err := v.OnRequest(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	ex.Validators = append(ex.Validators, brokenValidator{})
	ex.Response = completion(c03Answer)
	if err := v.OnResponse(context.Background(), ex); err != nil {
		t.Fatalf("a failing validator failed the request: %v", err)
	}
	if len(ex.Issues) != 1 {
		t.Fatalf("the deterministic issues are lost: %v", keys(ex.Issues, interceptors.Info))
	}
	var incomplete bool
	var notes []string
	ex.Trace.Do(func(tr *interceptors.Trace) { incomplete, notes = tr.ValidationIncomplete, tr.Notes })
	if !incomplete || !strings.Contains(strings.Join(notes, " "), "judge model timed out") {
		t.Fatalf("trace: incomplete %v, notes %q", incomplete, notes)
	}
}

// TestStageUsesTheChainsContextAndFacts: with the context and facts stages in the
// chain, the validator checks against what they resolved.
func TestStageUsesTheChainsContextAndFacts(t *testing.T) {
	t.Parallel()
	v, _ := newStage(t, Config{})
	pack := ra3Pack(t)
	fx, err := facts.New(facts.Config{}, interceptors.Deps{Route: "analyst", Pack: pack})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ex := newExchange(testLog)
	// The context stage says Alice plays 苏联 (a header overrode the log).
	reqcontext.Store(ex, &reqcontext.Context{KnowledgeSet: "ra3", Set: pack.Set("ra3"),
		Players: []knowledge.Player{{Name: "Alice", Scope: "苏联"}, {Name: "Boris", Scope: "盟军"}}})
	if err := fx.OnRequest(ctx, ex); err != nil {
		t.Fatal(err)
	}
	if err := v.OnRequest(ctx, ex); err != nil {
		t.Fatal(err)
	}
	ex.Response = completion(answer(unitClaims(unit("300", "Alice", "AlliedAirfield", "confirmed", "produce|2:00|AlliedFighterAircraft|300", "select|9:00|300"))))
	if err := v.OnResponse(ctx, ex); err != nil {
		t.Fatal(err)
	}
	want := []string{"asset.unknown|Warning|unitClaims[0]", "evidence.not_in_replay|Contradiction|unitClaims[0].evidence[1]"}
	if got := keys(ex.Issues, interceptors.Info); !slices.Equal(got, want) {
		t.Fatalf("issues %v, want %v (the context stage's factions, the facts stage's index)", got, want)
	}
}

// The stage leaves the request's claims.Locations on the exchange, for the
// revision step to strip the draft's block without locating it again; what it
// remembers strips as locating does.
func TestStageRemembersTheBlocksLocation(t *testing.T) {
	t.Parallel()
	v, _ := newStage(t, Config{})
	ctx := context.Background()
	ex := newExchange(testLog)
	if err := v.OnRequest(ctx, ex); err != nil {
		t.Fatal(err)
	}
	l := claims.LocationsOf(ex)
	if l == nil {
		t.Fatal("no claims.Locations on the exchange")
	}
	if in := v.input(ex); in.Locations != l {
		t.Fatal("the checks remember the blocks elsewhere than the exchange's claims.Locations")
	}
	ex.Response = completion(c03Answer)
	if err := v.OnResponse(ctx, ex); err != nil {
		t.Fatal(err)
	}
	p := v.checker.Parser()
	if got, want := p.StripBlockIn(l, strings.Clone(c03Answer)), p.StripBlock(c03Answer); got != want {
		t.Fatalf("stripped with the remembered location: %q, want %q", got, want)
	}
}
