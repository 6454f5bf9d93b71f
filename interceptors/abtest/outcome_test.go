package abtest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/factgate/factgate/interceptors"
)

// noValidator stands in for the validate stage's validator: its presence on the
// exchange is what "the draft was validated" means.
type noValidator struct{}

func (noValidator) Name() string    { return "validate" }
func (noValidator) LLMBacked() bool { return false }
func (noValidator) ValidateAnswer(context.Context, *interceptors.Exchange, string) ([]interceptors.Issue, error) {
	return nil, nil
}

func issues(sev ...interceptors.Severity) []interceptors.Issue {
	out := make([]interceptors.Issue, len(sev))
	for i, s := range sev {
		out[i] = interceptors.Issue{Code: "test." + s.String(), Severity: s, Path: "unitClaims[0]"}
	}
	return out
}

func usage(total int) interceptors.Usage {
	return interceptors.Usage{PromptTokens: total - 10, CompletionTokens: 10, TotalTokens: total}
}

// finished is what the later stages leave on an exchange: the answer, its issues,
// the hidden calls and the trace, as validate and revise record them.
type finished struct {
	status      int // 0: the upstream could not be reached
	validated   bool
	draft       []interceptors.Issue
	final       []interceptors.Issue
	outcome     string // Trace.Final.Outcome; "" when no revision step ran
	revisions   []int  // tokens of each hidden call
	draftTokens int
	otherTokens int // LLM-backed validators
	downgrades  int
	// listings are edits that only list what would confirm a claim (its level
	// stays): not a downgrade.
	listings int
}

// run sends one request through the experiment as the proxy would: request phase,
// the rest of the chain (simulated), response phase.
func run(t *testing.T, e *Experiment, ex *interceptors.Exchange, f finished) {
	t.Helper()
	if err := e.OnRequest(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	if f.validated {
		ex.Validators = append(ex.Validators, noValidator{})
	}
	if f.status != 0 {
		ex.Response = &interceptors.Response{Status: f.status, Body: []byte(`{"choices":[{"message":{"content":"x"}}],"usage":` + string(usage(f.draftTokens).JSON()) + `}`)}
	}
	if f.status/100 != 2 {
		return
	}
	ex.Usage = usage(f.draftTokens)
	if f.validated {
		ex.DraftIssues, ex.Issues = f.draft, f.draft
		ex.Trace.AddAttempt(interceptors.Attempt{Kind: "draft", Issues: f.draft, Usage: usage(f.draftTokens)})
	}
	for _, tok := range f.revisions {
		ex.Revisions++
		ex.Usage = ex.Usage.Add(usage(tok))
		ex.Trace.AddAttempt(interceptors.Attempt{Kind: "revision", Usage: usage(tok)})
	}
	if f.otherTokens > 0 {
		ex.Usage = ex.Usage.Add(usage(f.otherTokens))
	}
	if f.final != nil || f.outcome != "" {
		ex.Issues = f.final
	}
	ex.Trace.Do(func(tr *interceptors.Trace) {
		if f.outcome != "" {
			tr.Final = &interceptors.FinalOutcome{Outcome: f.outcome}
		}
		for i := 0; i < f.downgrades; i++ {
			tr.Downgrades = append(tr.Downgrades, interceptors.Downgrade{Path: "unitClaims[0]", From: "confirmed", To: "possible"})
		}
		for i := 0; i < f.listings; i++ {
			tr.Downgrades = append(tr.Downgrades, interceptors.Downgrade{Path: "unitClaims[1]", From: "possible", To: "possible", NeedsConfirmation: []string{"x"}})
		}
	})
}

func respond(t *testing.T, e *Experiment, ex *interceptors.Exchange) {
	t.Helper()
	if err := e.OnResponse(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
}

func TestOutcomesAreCountedPerVariant(t *testing.T) {
	t.Parallel()
	e := newExperiment(t, `
name: outcomes
allow_forcing: true
control: a
variants:
  - {name: a, weight: 1}
  - {name: b, weight: 1}
`)
	C, W, F := interceptors.Contradiction, interceptors.Warning, interceptors.Fatal
	requests := []finished{
		// accepted: a Warning only, below the threshold, fixed by listing what
		// would confirm the claim.
		{status: 200, validated: true, draft: issues(W), outcome: OutcomeAccepted, draftTokens: 100, listings: 1},
		// a contradiction resolved by one revision.
		{status: 200, validated: true, draft: issues(C, C, W), final: []interceptors.Issue{}, outcome: OutcomeResolved, revisions: []int{150}, draftTokens: 100},
		// two revisions that did not help: downgraded, the contradiction remains.
		{status: 200, validated: true, draft: issues(C), final: issues(C), outcome: OutcomeDowngraded, revisions: []int{120, 130}, draftTokens: 100, downgrades: 1},
		// no claims block: repaired (Fatal in the draft, not a Contradiction).
		{status: 200, validated: true, draft: issues(F), final: []interceptors.Issue{}, outcome: OutcomeResolved, revisions: []int{40}, draftTokens: 100, otherTokens: 30},
		// validation off for the request.
		{status: 200, validated: false, draftTokens: 80},
		// the upstream answered 503, and one that could not be reached.
		{status: 503},
		{status: 0},
	}
	for _, f := range requests {
		ex := exchange(`{"model":"m"}`, headers{"X-Factgate-Subject": "alice"}, "")
		run(t, e, ex, f)
		// Force the measured latency into the 250-500ms bucket.
		a := ex.Value(assignmentKey{}).(*assignment)
		a.start = a.start.Add(-300 * time.Millisecond)
		respond(t, e, ex)
	}
	// A forced request is counted apart.
	forced := exchange(`{"model":"m"}`, headers{"X-Factgate-Variant": "a", "X-Factgate-Subject": "alice"}, "")
	run(t, e, forced, finished{status: 200, validated: true, draft: issues(C), outcome: OutcomeDowngraded, draftTokens: 100})
	respond(t, e, forced)
	e.Wait()

	alice := e.pickBySubject("alice").name
	rep := e.Report(context.Background())
	var vr VariantReport
	for _, v := range rep.Variants {
		if v.Name == alice {
			vr = v
		} else if v.Requests != 0 || (v.Name == "b" && v.ForcedRequests != 0) {
			t.Errorf("variant %s counted %d requests; every one went to %s", v.Name, v.Requests, alice)
		}
	}
	if alice == "a" && vr.ForcedRequests != 1 {
		t.Errorf("forced requests %d, want 1", vr.ForcedRequests)
	}
	checks := []struct {
		name      string
		got, want int64
	}{
		{"requests", vr.Requests, 7},
		{"validated", vr.Validated, 4},
		{"upstream errors", vr.UpstreamErrors, 2},
		{"hidden calls", vr.Revisions, 4},
		{"requests with a hidden call", vr.Revised, 3},
		{"outcome accepted", vr.Outcomes[OutcomeAccepted], 1},
		{"outcome resolved", vr.Outcomes[OutcomeResolved], 2},
		{"outcome downgraded", vr.Outcomes[OutcomeDowngraded], 1},
		{"outcome unvalidated", vr.Outcomes[OutcomeUnvalidated], 1},
		{"outcome upstream_error", vr.Outcomes[OutcomeUpstreamError], 2},
		{"first drafts with a Contradiction", vr.Rates.FirstDraftContradiction.Count, 2},
		{"first-draft rate's denominator", vr.Rates.FirstDraftContradiction.Total, 4},
		{"drafts with a Warning or worse", vr.Rates.FirstDraftAtLeast["Warning"].Count, 4},
		{"drafts with a Fatal", vr.Rates.FirstDraftAtLeast["Fatal"].Count, 1},
		{"Contradiction issues in drafts", vr.DraftIssues["Contradiction"], 3},
		{"Contradictions left in answers", vr.ResidualIssues["Contradiction"], 1},
		{"answers still contradicted", vr.Rates.ResidualContradiction.Count, 1},
		{"revision rate count", vr.Rates.Revision.Count, 3},
		{"resolved", vr.Rates.Resolved.Count, 2},
		{"resolved's denominator: drafts that triggered a revision", vr.Rates.Resolved.Total, 3},
		{"answers with a downgrade", vr.Rates.Downgrade.Count, 1},
		{"error rate count", vr.Rates.Error.Count, 2},
		{"error rate's denominator", vr.Rates.Error.Total, 7},
		// 100 + (100+150) + (100+120+130) + (100+40+30) + 80 tokens.
		{"tokens", vr.Tokens.Total, 950},
		{"draft tokens", vr.Tokens.Draft, 480},
		{"revision tokens", vr.Tokens.Revision, 440},
		{"requests in the 250-500ms bucket", vr.Latency.Buckets[2].Count, 7},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	if vr.Tokens.Mean == nil || *vr.Tokens.Mean != 950.0/5 {
		t.Errorf("mean tokens %v, want 190 (950 over the 5 answered requests)", vr.Tokens.Mean)
	}
	if vr.Latency.Mean == nil || *vr.Latency.Mean < 300 || *vr.Latency.Mean > 500 {
		t.Errorf("mean latency %v ms, want about 300", vr.Latency.Mean)
	}
	if vr.Latency.P95AtMost == nil || *vr.Latency.P95AtMost != 500 {
		t.Errorf("p95 at most %v ms, want 500", vr.Latency.P95AtMost)
	}
	// Wilson for 2/4 by hand: p̂ = 0.5, 1 + z²/n = 1.960365, centre = 0.5,
	// half = (1.959964/1.960365)·√(0.25/4 + 3.841459/64) = 0.999796·0.350033 = 0.349961.
	r := vr.Rates.FirstDraftContradiction
	if r.Value == nil || *r.Value != 0.5 || r.Low == nil || math.Abs(*r.Low-0.150039) > 1e-6 || math.Abs(*r.High-0.849961) > 1e-6 {
		t.Errorf("first-draft contradiction rate %s, want 0.5 with the Wilson interval [0.150039, 0.849961]", r)
	}
}

func TestTheReportComparesEachVariantWithTheControl(t *testing.T) {
	t.Parallel()
	e := newExperiment(t, `
name: compare
allow_forcing: true
control: baseline
variants:
  - {name: baseline, weight: 1}
  - {name: strict, weight: 1}
  - {name: terse, weight: 2}
`)
	// Write the counters as replicas would have: baseline 30 of 100 first drafts
	// contradicted, strict 12 of 100, terse none of 10.
	ctx := context.Background()
	set := func(v string, validated, contradicted int64) {
		err := e.cache.HashIncr(ctx, counterKey("ra3", "compare", v, false), map[string]int64{
			fieldRequests: validated, fieldValidated: validated, fieldDraftContradiction: contradicted,
		}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
	}
	set("baseline", 100, 30)
	set("strict", 100, 12)
	set("terse", 10, 0)
	rep := e.Report(ctx)
	if rep.Control != "baseline" || len(rep.Variants) != 3 || !rep.Variants[0].Control || rep.Variants[1].Control {
		t.Fatalf("variants %+v, control %s", rep.Variants, rep.Control)
	}
	if s := rep.Variants[2].Share; s != 0.5 {
		t.Errorf("terse's share %v, want 0.5 (weight 2 of 4)", s)
	}
	if len(rep.Comparisons) != 2*len(ComparedMetrics) {
		t.Fatalf("%d comparisons, want %d (two variants × %v)", len(rep.Comparisons), 2*len(ComparedMetrics), ComparedMetrics)
	}
	// strict vs baseline, by hand: p̄ = 42/200 = 0.21, SE = √(0.21·0.79·(2/100)) = 0.057602,
	// z = (0.12 − 0.30)/0.057602 = −3.124887, p = erfc(3.124887/√2) = 0.0017787.
	c := rep.Comparisons[0]
	if c.Variant != "strict" || c.Metric != MetricFirstDraftContradiction {
		t.Fatalf("first comparison %s %s, want strict's first-draft contradiction", c.Variant, c.Metric)
	}
	if c.Difference == nil || math.Abs(*c.Difference+0.18) > 1e-12 || c.Z == nil || math.Abs(*c.Z+3.124887) > 1e-6 || math.Abs(*c.P-0.0017787) > 1e-7 {
		t.Errorf("strict vs baseline: difference %v z %v p %v, want −0.18, −3.124887, 0.0017787", deref(c.Difference), deref(c.Z), deref(c.P))
	}
	if *c.Low >= *c.Difference || *c.High <= *c.Difference || *c.High >= 0 {
		t.Errorf("interval [%v, %v] around %v should exclude 0", *c.Low, *c.High, *c.Difference)
	}
	// terse has no contradiction and no revision data: the difference is defined,
	// the revision comparison is not testable (no event anywhere).
	for _, c := range rep.Comparisons {
		if c.Variant == "terse" && c.Metric == MetricRevision && (c.Difference == nil || *c.Difference != 0 || c.Z != nil || c.P != nil) {
			t.Errorf("terse's revision comparison %+v: want a difference of 0 and no test", c)
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestQuantileBound(t *testing.T) {
	t.Parallel()
	b := func(bound float64, n int64) LatencyBucket { return LatencyBucket{UpTo: ptr(bound), Count: n} }
	tests := []struct {
		name    string
		buckets []LatencyBucket
		q       float64
		want    *float64
	}{
		{name: "no values", buckets: []LatencyBucket{b(100, 0), {Count: 0}}, q: 0.5},
		{name: "the median's bucket", buckets: []LatencyBucket{b(100, 4), b(250, 1), b(500, 5), {Count: 0}}, q: 0.5, want: ptr(250.0)},
		{name: "the 95th in the last bounded bucket", buckets: []LatencyBucket{b(100, 90), b(250, 10), {Count: 0}}, q: 0.95, want: ptr(250.0)},
		{name: "beyond the last bound", buckets: []LatencyBucket{b(100, 90), {Count: 10}}, q: 0.95},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := quantileBound(tc.buckets, tc.q)
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Fatalf("quantile %v bound %v, want %v", tc.q, deref(got), deref(tc.want))
			}
		})
	}
}

func TestServerFailuresInsideTheExperimentAreCountedClientErrorsAreNot(t *testing.T) {
	t.Parallel()
	e := newExperiment(t, `
name: failures
control: a
variants:
  - {name: a, weight: 1}
  - {name: b, weight: 1}
`)
	for _, status := range []int{502, 504, 400, 499} {
		ex := exchange(`{"model":"m"}`, headers{"X-Factgate-Subject": "carol"}, "")
		if err := e.OnRequest(context.Background(), ex); err != nil {
			t.Fatal(err)
		}
		e.OnFailure(context.Background(), ex, interceptors.Errorf(status, "server_error", "semantic_validation_failed", "judge failed"))
	}
	e.Wait()
	carol := e.pickBySubject("carol").name
	for _, v := range e.Report(context.Background()).Variants {
		if v.Name != carol {
			continue
		}
		if v.Requests != 2 || v.UpstreamErrors != 2 || v.Outcomes[OutcomeError] != 2 {
			t.Fatalf("variant %s: %d requests, %d errors, outcomes %v; want the two 5xx counted as errors, the 400 and 499 not counted", v.Name, v.Requests, v.UpstreamErrors, v.Outcomes)
		}
	}
}
