package knowledge

import (
	"strings"
	"testing"
	"testing/fstest"
)

// rulesPack is a small pack whose rules file is the test's.
func rulesPack(rules string) fstest.MapFS {
	return fstest.MapFS{
		"p/pack.yaml": {Data: []byte(`name: t
language: en
claims:
  marker: '[claims]'
  contract: contract.md
rules: rules.yaml
`)},
		"p/contract.md": {Data: []byte("End with [claims] and a JSON object.\n")},
		"p/rules.yaml":  {Data: []byte(rules)},
	}
}

func TestRulesLoad(t *testing.T) {
	p, err := LoadPack(rulesPack(`rules:
  - id: claim.vague
    kind: unitClaims
    severity: warning
    notice: weak
    message: 'The claim {{.Args.claim}} is vague.'
    levels: [possible]
    let: {c: 'claim.claim'}
    when: 'c == ""'
    args: {claim: 'c'}
`), "p")
	if err != nil {
		t.Fatal(err)
	}
	if p.RuleSet == nil || len(p.RuleSet.Rules) != 1 {
		t.Fatalf("rules: %+v", p.RuleSet)
	}
	r := p.RuleSet.Rules[0]
	if r.Code != "claim.vague" || r.Severity != "Warning" || len(r.Lets) != 1 || r.When.AST == nil || len(r.Args) != 1 {
		t.Fatalf("rule: %+v", r)
	}
	m := p.Messages["claim.vague"]
	if m.Notice != "weak" || m.MessageTmpl == nil {
		t.Fatalf("message: %+v", m)
	}
	if h := p.NoticeHeading("claim.vague", "Warning"); h != "weak" {
		t.Fatalf("heading %q", h)
	}
}

func TestRulesErrorsNamePlace(t *testing.T) {
	for _, tc := range []struct{ rules, want string }{
		{"rules:\n  - id: a\n    kind: unitClaims\n    severity: Warning\n    when: 'claim.claim == '\n", "p/rules.yaml:5:"},
		{"rules:\n  - id: a\n    kind: unitClaims\n    severity: Warning\n    when: 'nosuch(claim)'\n", "p/rules.yaml:5:18: rules[0] (a).when: undeclared reference to 'nosuch'"},
		{"rules:\n  - id: a\n    kind: unitClaims\n    severity: Warning\n    when: |\n      claim.claim != \"\" &&\n        frob(1)\n", "p/rules.yaml:7:13: rules[0] (a).when: undeclared reference to 'frob'"},
		{"rules:\n  - id: a\n    kind: orders\n    severity: Warning\n    when: 'true'\n", "unknown claim kind \"orders\""},
		{"rules:\n  - id: a\n    kind: unitClaims\n    severity: Bad\n    when: 'true'\n", "unknown severity"},
		{"rules:\n  - id: a\n    kind: unitClaims\n    severity: Info\n    when: '1 + 2'\n", "want a bool"},
		{"rules:\n  - id: a\n    kind: unitClaims\n    severity: Info\n    when: 'true'\n  - id: a\n    kind: unitClaims\n    severity: Info\n    when: 'true'\n", "used twice"},
	} {
		_, err := LoadPack(rulesPack(tc.rules), "p")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rules %q: error %v, want %q", tc.rules, err, tc.want)
		}
	}
}

func TestRA3RulesLoad(t *testing.T) {
	packs, err := BuiltinPacks()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range packs {
		if p.Name == "ra3" && (p.RuleSet == nil || len(p.RuleSet.Rules) < 10) {
			t.Fatalf("ra3 rules: %+v", p.RuleSet)
		}
	}
}
