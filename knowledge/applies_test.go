package knowledge

import (
	"os"
	"path/filepath"
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
		{"ra3: a follow-up in a session", "ra3", ApplyInput{UserTexts: []string{"最后总结一下这局"}, Session: "match-42"}, true, true},
		{"dnd: a question in a session is not a transcript", "dnd", ApplyInput{UserTexts: []string{"What is a saving throw?"}, Session: "s1"}, false, false},
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

func TestLineStartSkipsOnlyLinesThatCannotMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr            string
		admit, rejected []string
	}{
		{`^(?P<time>\d+:\d{1,2})\s+x`, []string{"1:24 x", "12"}, []string{"x 1:24", "", " 1:24 x"}},
		{`^\s*(?:地图|玩家)\s*[:：]`, []string{"地图: m", "  玩家：A", "\t地图"}, []string{"Mod: default", "我们"}},
		{`^(?i)dm:`, []string{"DM: hi", "dm:"}, []string{"Tom: hi"}},
		{`^(?:a|b?)c`, []string{"ac", "c"}, []string{"dc"}},
		{`^[^x]`, []string{"y", "é"}, nil},
		{`unanchored`, []string{"anything", ""}, nil},
		{`^.*x`, []string{"anything"}, nil},
		{`^x{0,2}y`, []string{"y", "xy"}, []string{"zy"}},
	}
	for _, tc := range tests {
		s := lineStartOf(tc.expr)
		for _, line := range tc.admit {
			if !s.admits(line) {
				t.Errorf("%s rejects %q", tc.expr, line)
			}
		}
		for _, line := range tc.rejected {
			if s.admits(line) {
				t.Errorf("%s admits %q", tc.expr, line)
			}
		}
	}
}

// Every operation line of the fixture replays passes the RA3 pack's prefilter.
func TestOperationLinesPassThePrefilter(t *testing.T) {
	t.Parallel()
	p := ra3Pack(t)
	start := p.ApplyRules.opStart
	if start == nil || start.all {
		t.Fatalf("the ra3 pack has no operation-line prefilter: %+v", start)
	}
	files, _ := filepath.Glob("testdata/replays/*.txt")
	n := 0
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if r, _ := firstOp(p.Facts, line); r != nil {
				n++
				if !start.admits(line) {
					t.Fatalf("%s: the prefilter rejects the operation line %q", path, line)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no operation lines")
	}
}

// mentioningTexts are Texts that answer ClientMentions themselves.
type mentioningTexts struct {
	Texts
	marker string // what the client's messages contain
}

func (m mentioningTexts) ClientMentions(s string) bool { return s == m.marker }

// TestAppliesAsksTheHeadsForMentions: without a ClientMentions function, heads
// that are a ClientMentioner answer it; a function, when given, is asked instead.
func TestAppliesAsksTheHeadsForMentions(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	p := reg.Pack("ra3")
	hello := Texts{"Say hello"}
	for _, tc := range []struct {
		name   string
		in     ApplyInput
		domain bool
	}{
		{"the heads mention the marker", ApplyInput{Heads: mentioningTexts{hello, "[机器可读声明]"}}, true},
		{"the heads do not", ApplyInput{Heads: mentioningTexts{hello, "other"}}, false},
		{"heads that cannot tell", ApplyInput{Heads: hello}, false},
		{"the function over the heads", ApplyInput{Heads: mentioningTexts{hello, "[机器可读声明]"}, ClientMentions: func(string) bool { return false }}, false},
	} {
		if a := p.Applies(tc.in); a.Domain != tc.domain {
			t.Errorf("%s: Applies = %+v, want domain %v", tc.name, a, tc.domain)
		}
	}
}
