package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed sets are exactly what the generator makes from its inputs: nobody
// edits a generated file by hand, and nobody forgets to regenerate.
func TestCommittedSetsAreUpToDate(t *testing.T) {
	t.Parallel()
	out, err := generateFromDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range setNames {
		have, err := os.ReadFile(filepath.Join("..", "sets", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, out[name]) {
			t.Errorf("sets/%s.json is stale: run go run ./knowledge/packs/ra3/gen from the repository root", name)
		}
	}
}

func TestGeneratorRefusesUnsourcedOrUntranslatedData(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	assets, zh, rules := read("assets.json"), read("zh.json"), read("rules.json")
	tests := []struct {
		name              string
		assets, zh, rules string
		want              string
	}{
		{"asset without a Chinese note", assets, strings.Replace(zh, `"AlliedMiner": `, `"AlliedMinerX": `, 1), rules, "no Chinese note for asset AlliedMiner"},
		{"tag outside the taxonomy", strings.Replace(assets, `"amphibious",`, `"swims",`, 1), zh, rules, `tag "swims" is not in the taxonomy`},
		{"power without a Chinese note", assets, strings.Replace(zh, `"SpecialPower_ShrinkRay":`, `"SpecialPower_Shrink":`, 1), rules, "no Chinese note for special power SpecialPower_ShrinkRay"},
		{"invalid rule entry", assets, zh, strings.Replace(rules, `"tags": ["rule"]`, `"tags": ["rules"]`, 1), `unknown tag "rules"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := generate([]byte(tc.assets), []byte(tc.zh), []byte(tc.rules))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
}
