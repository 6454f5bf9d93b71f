package claims

import (
	"testing"

	"github.com/factgate/factgate/knowledge"
)

// TestBuiltinPacks builds a Parser from every built-in pack's own contract, the way
// the validator does, and checks that the RA3 pack reads the fixture answers exactly
// as the test contract does.
func TestBuiltinPacks(t *testing.T) {
	t.Parallel()
	packs, err := knowledge.BuiltinPacks()
	if err != nil {
		t.Fatalf("loading the built-in packs: %v", err)
	}
	ours := newRA3Parser(t)
	for _, pack := range packs {
		t.Run(pack.Name, func(t *testing.T) {
			t.Parallel()
			var evidence map[string][]string
			if pack.Facts != nil {
				evidence = pack.Facts.Evidence
			}
			p, err := NewParser(pack.Claims, evidence)
			if err != nil {
				t.Fatalf("NewParser for pack %s: %v", pack.Name, err)
			}
			if pack.Name != "ra3" {
				return
			}
			for _, fc := range loadCases(t) {
				got, want := p.Parse(fc.Answer, Required), ours.Parse(fc.Answer, Required)
				if joinKeys(issueKeys(got.Issues)) != joinKeys(issueKeys(want.Issues)) || len(got.UnitClaims) != len(want.UnitClaims) {
					t.Errorf("%s: the pack's parser reports %v, the test contract %v", fc.ID, issueKeys(got.Issues), issueKeys(want.Issues))
				}
			}
		})
	}
}
