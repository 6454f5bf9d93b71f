package revise

import (
	"strings"
	"testing"
	"text/template"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/knowledge"
)

// ordersPack is a pack of another domain, declared only as data: an order claim
// with a level, evidence and alternatives but no needsConfirmation, and a note
// claim with no level at all.
func ordersPack(t *testing.T) *knowledge.Pack {
	t.Helper()
	order := knowledge.ClaimKind{Name: "orderClaims", Cap: 5, Fields: map[string]knowledge.FieldType{
		"order": "string", "claim": "string", "evidenceLevel": "level", "evidence": "evidence", "alternatives": "strings",
	}, FieldOrder: []string{"order", "claim", "evidenceLevel", "evidence", "alternatives"}, Required: []string{"order"}}
	note := knowledge.ClaimKind{Name: "noteClaims", Cap: 3, Fields: map[string]knowledge.FieldType{"text": "string"}, FieldOrder: []string{"text"}}
	return &knowledge.Pack{
		Name:     "orders",
		Facts:    &knowledge.FactRules{Evidence: map[string][]string{"order": {"id"}}},
		Claims:   &knowledge.ClaimsContract{Marker: "[claims]", Kinds: knowledge.ClaimKinds{order, note}},
		Revision: &knowledge.RevisionSpec{Tmpl: template.Must(template.New("r").Parse("{{range .Issues}}{{.Message}}\n{{end}}"))},
		Messages: map[string]knowledge.MessageSpec{},
	}
}

func TestDowngradeEditsAnyDeclaredKind(t *testing.T) {
	t.Parallel()
	r, err := New(nil, interceptors.Deps{Route: "orders", Pack: ordersPack(t)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	draft := "The order shipped on Monday.\n\n[claims]\n```json\n{\n  \"orderClaims\": [\n" +
		`    {"order": "A1", "claim": "shipped", "evidenceLevel": "confirmed", "evidence": ["order|0:00|A1", "order|0:05|A9"]},` + "\n" +
		`    {"order": "Z9", "claim": "refunded", "evidenceLevel": "confirmed"}` + "\n  ],\n" +
		`  "noteClaims": [{"text": "n"}]` + "\n}\n```\n"
	issues := []interceptors.Issue{
		{Code: "order.status_mismatch", Severity: interceptors.Contradiction, Path: "orderClaims[0]",
			Recommendation: interceptors.Recommendation{EvidenceLevel: "possible", Alternatives: []string{"pending"}}},
		{Code: "evidence.not_in_replay", Severity: interceptors.Contradiction, Path: "orderClaims[0].evidence[1]"},
		{Code: "order.unknown", Severity: interceptors.Warning, Path: "orderClaims[1]", Recommendation: interceptors.Recommendation{Remove: true}},
		{Code: "note.odd", Severity: interceptors.Contradiction, Path: "noteClaims[0]"},
	}
	// The evidence contradiction recommends no level: at the threshold the claim
	// goes to uncertain, as a ra3 claim would.
	out, done, notes := r.downgrade(draft, issues, interceptors.Contradiction)
	if !strings.HasPrefix(out, "The order shipped on Monday.\n\n[claims]\n") {
		t.Fatalf("the prose changed:\n%s", out)
	}
	if len(notes) != 0 {
		t.Fatalf("notes: %v", notes)
	}
	c := r.parser.Parse(out, claims.Required)
	if len(c.Records) != 2 || c.Records[0].Path != "orderClaims[0]" || c.Records[1].Kind != "noteClaims" {
		t.Fatalf("records after the downgrade:\n%s", out)
	}
	o := c.Records[0]
	if o.Level != claims.Uncertain || len(o.Evidence) != 1 || o.Evidence[0].Raw != "order|0:00|A1" {
		t.Errorf("orderClaims[0] = %+v\n%s", o, out)
	}
	if alts, _ := o.Field("alternatives"); len(alts.([]string)) != 1 {
		t.Errorf("alternatives = %v", alts)
	}
	if strings.Contains(out, "needsConfirmation") {
		t.Errorf("a kind without needsConfirmation got one:\n%s", out)
	}
	var removed, lowered bool
	for _, d := range done {
		removed = removed || d.Path == "orderClaims[1]" && d.Removed
		lowered = lowered || d.Path == "orderClaims[0]" && d.From == "confirmed" && d.To == "uncertain" && len(d.RemovedEvidence) == 1
		if d.Path == "noteClaims[0]" {
			t.Errorf("a claim without a level was edited: %+v", d)
		}
	}
	if !removed || !lowered {
		t.Errorf("downgrades = %+v", done)
	}
}
