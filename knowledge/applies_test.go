package knowledge

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

func TestBuiltinPacksSayWhichRequestsTheyAreAbout(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile("testdata/replays/mcv_vs_miner.txt")
	if err != nil {
		t.Fatal(err)
	}
	ops := "[操作记录]\n1:24.00 Alice 使用 SpecialPower_PackReplaceSelf [UnitId]246\n"
	asks := func(s string) bool { return s == "[机器可读声明]" }
	tests := []struct {
		name             string
		pack             string
		in               ApplyInput
		domain, contract bool
	}{
		{"ra3: an operation log", "ra3", ApplyInput{UserTexts: []string{"请分析。\n" + string(log)}}, true, true},
		{"ra3: a later segment, operation lines only", "ra3", ApplyInput{UserTexts: []string{ops}}, true, true},
		{"ra3: the log's header lines", "ra3", ApplyInput{UserTexts: []string{"玩家：Alice (盟军)"}}, true, true},
		{"ra3: the log in the second user message", "ra3", ApplyInput{UserTexts: []string{"你好", string(log)}}, true, true},
		{"ra3: say hello", "ra3", ApplyInput{UserTexts: []string{"Say hello"}}, false, false},
		{"ra3: a Mod line alone is not a log", "ra3", ApplyInput{UserTexts: []string{"Mod: default"}}, false, false},
		{"ra3: the app asks for the claims block", "ra3", ApplyInput{UserTexts: []string{"Say hello"}, ClientMentions: asks}, true, true},
		{"ra3: JSON mode gets the knowledge, not the contract", "ra3", ApplyInput{UserTexts: []string{string(log)}, JSONMode: true}, true, false},
		{"ra3: an operation past the scanned lines", "ra3", ApplyInput{UserTexts: []string{strings.Repeat("x\n", DefaultContextMaxLines) + ops}}, false, false},
		{"dnd: a transcript", "dnd", ApplyInput{UserTexts: []string{"Maya (Seren): I cast fire bolt.\nDM: Hits."}}, true, true},
		{"dnd: a transcript in JSON mode", "dnd", ApplyInput{UserTexts: []string{"DM: Roll initiative."}, JSONMode: true}, true, true},
		{"dnd: a question", "dnd", ApplyInput{UserTexts: []string{"What is a saving throw?"}}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := reg.Pack(tc.pack).Applies(tc.in)
			if a.Domain != tc.domain || a.Contract != tc.contract || a.Reason == "" {
				t.Fatalf("Applies = %+v, want domain %v contract %v and a reason", a, tc.domain, tc.contract)
			}
		})
	}
}

func TestAPackWithoutApplyRulesIsAboutEveryRequest(t *testing.T) {
	t.Parallel()
	p, err := LoadPack(minimalPack(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if a := p.Applies(ApplyInput{UserTexts: []string{"hello"}}); !a.Domain || !a.Contract {
		t.Fatalf("Applies = %+v", a)
	}
	if a := p.Applies(ApplyInput{UserTexts: []string{"hello"}, JSONMode: true}); !a.Domain || a.Contract {
		t.Fatalf("JSON mode: Applies = %+v, want the domain without the contract", a)
	}
	fsys := minimalPack()
	fsys["p/pack.yaml"] = &fstest.MapFile{Data: append(fsys["p/pack.yaml"].Data, "applies: {user_line: '^Q:', json_mode: true}\n"...)}
	p, err = LoadPack(fsys, "p")
	if err != nil {
		t.Fatal(err)
	}
	if a := p.Applies(ApplyInput{UserTexts: []string{"intro\nQ: why?"}, JSONMode: true}); !a.Domain || !a.Contract {
		t.Fatalf("user_line + json_mode: Applies = %+v", a)
	}
}
