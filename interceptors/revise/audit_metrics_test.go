package revise

import (
	"testing"

	"github.com/factgate/factgate/interceptors"
)

// TestMetricsCountEveryOutcomeAndTheResidualIssues checks what an operator reads
// on /metrics after one validated answer: the outcome label of
// factgate_revisions_total (accepted answers are not counted there), the hidden
// calls in factgate_revision_attempts, and the issues left in the answer as
// delivered (after the downgrade) by severity in factgate_final_issues_total.
func TestMetricsCountEveryOutcomeAndTheResidualIssues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		draft    string
		rules    map[string]rule // nil: storyRules
		replies  []reply
		outcome  string // "" for an accepted draft
		calls    float64
		residual map[string]float64 // severity -> issues left
	}{
		{name: "a clean draft is accepted: no outcome, no residual issue",
			draft: answer("PlayerA 在 1:24 打包主基地。", base), calls: 0, residual: map[string]float64{}},
		{name: "a revision that fixes everything: resolved, nothing left",
			draft: storyDraft, replies: []reply{{content: storyFixed}}, outcome: interceptors.OutcomeResolved, calls: 1, residual: map[string]float64{}},
		{name: "a revision that repeats the draft: downgraded, nothing left in the claims as delivered",
			draft: storyDraft, replies: []reply{{content: storyDraft}}, outcome: interceptors.OutcomeDowngraded, calls: 1, residual: map[string]float64{}},
		{name: "a revision call that fails: failed, nothing left in the claims as delivered",
			draft: storyDraft, replies: []reply{{status: 500, raw: `{"error":{"message":"overloaded"}}`}}, outcome: interceptors.OutcomeFailed, calls: 1,
			residual: map[string]float64{}},
		{name: "a Warning no recommendation fixes: accepted, the Warning left",
			draft: answer("900 可能是苏联步兵。", unit{id: 900, claim: "SovietAntiInfantryInfantry", level: "possible", evidence: []string{"select|1:06.39|900"}, alternatives: []string{"SovietEngineer"}}),
			rules: map[string]rule{"900 SovietAntiInfantryInfantry": {code: "fake.warning", severity: interceptors.Warning}},
			calls: 0, residual: map[string]float64{"Warning": 1}},
		{name: "a Warning that recommends removing the claim: accepted, the claim removed, nothing left",
			draft: answer("900 可能是苏联步兵。", unit{id: 900, claim: "SovietAntiInfantryInfantry", level: "possible", evidence: []string{"select|1:06.39|900"}, alternatives: []string{"SovietEngineer"}}),
			rules: map[string]rule{"900 SovietAntiInfantryInfantry": {code: "asset.unknown", severity: interceptors.Warning, rec: interceptors.Recommendation{Remove: true}}},
			calls: 0, residual: map[string]float64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rules := tc.rules
			if rules == nil {
				rules = storyRules
			}
			f := newFixture(t, setup{draft: tc.draft, rules: rules, replies: tc.replies})
			f.run(t)
			for _, o := range []string{interceptors.OutcomeResolved, interceptors.OutcomeImproved, interceptors.OutcomeDowngraded, interceptors.OutcomeFailed, interceptors.OutcomeAccepted} {
				want := 0.0
				if o == tc.outcome {
					want = 1
				}
				if got := f.metric("factgate_revisions_total", "outcome", o); got != want {
					t.Errorf("factgate_revisions_total{outcome=%q} = %v, want %v", o, got, want)
				}
			}
			if got := f.metric("factgate_revision_attempts", "route", "ra3"); got != 1 {
				t.Errorf("factgate_revision_attempts count = %v, want 1 observation", got)
			}
			if got := attemptsSum(t, f); got != tc.calls {
				t.Errorf("factgate_revision_attempts sum = %v, want %v hidden calls", got, tc.calls)
			}
			for _, sev := range []string{"Info", "WeakEvidence", "Warning", "Contradiction", "Fatal"} {
				if got, want := f.metric("factgate_final_issues_total", "severity", sev), tc.residual[sev]; got != want {
					t.Errorf("factgate_final_issues_total{severity=%q} = %v, want %v", sev, got, want)
				}
			}
		})
	}
}

// attemptsSum returns the sum of the factgate_revision_attempts histogram.
func attemptsSum(t *testing.T, f *fixture) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "factgate_revision_attempts" {
			for _, m := range mf.GetMetric() {
				return m.GetHistogram().GetSampleSum()
			}
		}
	}
	t.Fatal("no factgate_revision_attempts metric")
	return 0
}
