package validate

import (
	"testing"
	"testing/fstest"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// genericPack is a pack with only a claims contract and the rules given: the
// engine runs whatever a pack declares, no Go per rule.
func genericPack(tb testing.TB, rules string) *knowledge.Pack {
	tb.Helper()
	p, err := knowledge.LoadPack(fstest.MapFS{
		"p/pack.yaml": {Data: []byte(`name: generic
language: en
claims:
  marker: '[claims]'
  contract: contract.md
rules: rules.yaml
`)},
		"p/contract.md": {Data: []byte("End with [claims] and a JSON object.\n")},
		"p/rules.yaml":  {Data: []byte(rules)},
	}, "p")
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestEngineRunsAGenericRule(t *testing.T) {
	pack := genericPack(t, `rules:
  - id: claim.hedged_without_evidence
    kind: [eventClaims, timelineClaims]
    severity: Warning
    notice: weak
    message: 'The claim "{{.Args.claim}}" gives {{.Args.count}} evidence items.'
    levels: [possible]
    let: {n: 'size(claim.evidence)'}
    when: 'n == 0 && level_at_least(claim.level, "possible")'
    args: {claim: 'claim.claim', count: 'n', none: 'null'}
    recommend: {level: uncertain, alternatives: '["a", "b"]'}
  - id: claim.broken
    kind: eventClaims
    severity: Warning
    when: 'claim.nosuch == 1'
`)
	c, err := NewChecker(pack, Config{})
	if err != nil {
		t.Fatal(err)
	}
	before := testutil.ToFloat64(RuleErrors.WithLabelValues("generic", "claim.broken"))
	answer := "Text.\n\n[claims]\n```json\n" + `{"unitClaims": [], "eventClaims": [{"claim": "rush", "evidenceLevel": "possible", "evidence": []}], "timelineClaims": []}` + "\n```\n"
	issues := c.Check(answer, Input{})
	var got, broken *interceptors.Issue
	for i := range issues {
		switch issues[i].Code {
		case "claim.hedged_without_evidence":
			got = &issues[i]
		case CodeRuleError:
			broken = &issues[i]
		}
	}
	if got == nil {
		t.Fatalf("no issue of the generic rule: %+v", issues)
	}
	if got.Path != "eventClaims[0]" || got.Severity != interceptors.Warning || got.Args["claim"] != "rush" || got.Args["count"] != "0" {
		t.Errorf("issue: %+v", *got)
	}
	if _, ok := got.Args["none"]; ok {
		t.Errorf("a null argument is left out: %+v", got.Args)
	}
	if got.Message != `The claim "rush" gives 0 evidence items.` || got.Recommendation.EvidenceLevel != "uncertain" || len(got.Recommendation.Alternatives) != 2 {
		t.Errorf("texts: %+v", *got)
	}
	if broken == nil || broken.Severity != interceptors.Info || broken.Args["rule"] != "claim.broken" || broken.Args["error"] == "" {
		t.Fatalf("a failing rule gives rule.error: %+v", issues)
	}
	if d := testutil.ToFloat64(RuleErrors.WithLabelValues("generic", "claim.broken")) - before; d != 1 {
		t.Errorf("factgate_rule_errors_total grew by %v", d)
	}
}

// A rule using what the planner does not take (a member function, a map) runs as
// a cel-go program, with the same functions and variables.
func TestEngineRunsUnplannedExpressions(t *testing.T) {
	pack := genericPack(t, `rules:
  - id: claim.rushed
    kind: eventClaims
    severity: Info
    let: {m: '{"rush": 2}'}
    when: 'claim.claim.startsWith("ru") && m[claim.claim] == 2 && level_at_least(claim.level, "possible")'
    args: {claim: 'claim.claim', n: 'string(size(claim.evidence))'}
`)
	c, err := NewChecker(pack, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c.rules.planned == len(c.rules.exprs) {
		t.Fatal("every expression planned: the test needs one the planner does not take")
	}
	answer := "Text.\n\n[claims]\n```json\n" + `{"unitClaims": [], "eventClaims": [{"claim": "rush", "evidenceLevel": "possible", "evidence": []}], "timelineClaims": []}` + "\n```\n"
	var got *interceptors.Issue
	issues := c.Check(answer, Input{})
	for i := range issues {
		if issues[i].Code == "claim.rushed" {
			got = &issues[i]
		}
	}
	if got == nil || got.Args["claim"] != "rush" || got.Args["n"] != "0" {
		t.Fatalf("issues %+v", issues)
	}
}
