package knowledge

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func ra3Pack(t testing.TB) *Pack {
	t.Helper()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return reg.Pack("ra3")
}

func TestExtractContextFromEveryFixtureReplay(t *testing.T) {
	t.Parallel()
	p := ra3Pack(t)
	ab := []Player{{"PlayerA", "盟军"}, {"PlayerB", "苏联"}}
	tests := []struct {
		replay   string
		set      string
		factions []string
		maps     []string
		players  []Player
	}{
		{"allied_vs_soviet.txt", "ra3", []string{"盟军", "苏联"}, []string{"map_mp_2_rao1"}, ab},
		{"allied_vs_soviet.large.txt", "ra3", []string{"盟军", "苏联"}, []string{"map_mp_2_rao1"}, ab},
		{"allied_vs_soviet.part1.txt", "ra3", []string{"盟军", "苏联"}, []string{"map_mp_2_rao1"}, ab},
		{"allied_vs_soviet.part2.txt", "ra3", []string{"盟军", "苏联"}, []string{"map_mp_2_rao1"}, ab},
		{"allied_vs_soviet.part3.txt", "ra3", []string{"盟军", "苏联"}, []string{"map_mp_2_rao1"}, ab},
		{"corona_celestial_vs_allied.txt", "ra3-corona", []string{"神州", "盟军"}, []string{"map_mp_2_feasel1"}, []Player{{"青龙", "神州"}, {"Blue", "盟军"}}},
		{"mcv_vs_miner.txt", "ra3", []string{"盟军", "苏联"}, []string{"map_mp_2_rao1"}, []Player{{"Alice", "盟军"}, {"Boris", "苏联"}}},
	}
	entries, err := os.ReadDir("testdata/replays")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(tests) {
		t.Fatalf("testdata/replays has %d files, the table %d: every replay needs a row", len(entries), len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.replay, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile("testdata/replays/" + tc.replay)
			if err != nil {
				t.Fatal(err)
			}
			ex := ExtractContext(p, string(data))
			if ex.KnowledgeSet != tc.set || !ex.SetMatched {
				t.Errorf("set = %q (matched %v), want %q from the Mod line", ex.KnowledgeSet, ex.SetMatched, tc.set)
			}
			want := Scopes{"factions": tc.factions, "maps": tc.maps}
			if !reflect.DeepEqual(ex.Scopes, want) {
				t.Errorf("scopes = %v, want %v", ex.Scopes, want)
			}
			if !reflect.DeepEqual(ex.Players, tc.players) {
				t.Errorf("players = %v, want %v", ex.Players, tc.players)
			}
		})
	}
}

func TestExtractContextVariants(t *testing.T) {
	t.Parallel()
	p := ra3Pack(t)
	tests := []struct {
		name    string
		text    string
		set     string
		matched bool
		scopes  Scopes
		players []Player
	}{
		{
			name: "full-width punctuation and 旭日帝国",
			text: "Mod：corona\n地图：map_mp_2_feasel8\n玩家：Kenji（旭日帝国）；Anna（盟军）\n",
			set:  "ra3-corona", matched: true,
			scopes:  Scopes{"factions": {"帝国", "盟军"}, "maps": {"map_mp_2_feasel8"}},
			players: []Player{{"Kenji", "帝国"}, {"Anna", "盟军"}},
		},
		{
			name: "CRLF, BOM and prose before the header",
			text: "\uFEFF请分析下面的录像。\r\n\r\nMod: default\r\n地图: map_mp_2_rao1\r\n玩家: A (苏联); B (帝国)\r\n",
			set:  "ra3", matched: true,
			scopes:  Scopes{"factions": {"苏联", "帝国"}, "maps": {"map_mp_2_rao1"}},
			players: []Player{{"A", "苏联"}, {"B", "帝国"}},
		},
		{
			name: "mod in another case",
			text: "Mod: CORONA\n",
			set:  "ra3-corona", matched: true,
		},
		{
			name: "unknown mod falls back to ra3",
			text: "Mod: uprising\n",
			set:  "ra3", matched: true,
		},
		{
			name:    "a 2v2 with one faction twice",
			text:    "玩家: A (盟军); B (苏联); C (盟军); D (神州)\n",
			set:     "ra3",
			scopes:  Scopes{"factions": {"盟军", "苏联", "神州"}},
			players: []Player{{"A", "盟军"}, {"B", "苏联"}, {"C", "盟军"}, {"D", "神州"}},
		},
		{
			name: "no operation log: the rule's default set, nothing else",
			text: "你好，请介绍一下红警3的盟军。",
			set:  "ra3",
		},
		{
			name: "a header line inside a sentence does not count",
			text: "请注意 Mod: corona 这一行\n",
			set:  "ra3",
		},
		{
			name: "header beyond the scanned lines is not read",
			text: strings.Repeat("前言\n", DefaultContextMaxLines+1) + "Mod: corona\n",
			set:  "ra3",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ex := ExtractContext(p, tc.text)
			if ex.KnowledgeSet != tc.set || ex.SetMatched != tc.matched {
				t.Errorf("set = %q matched=%v, want %q matched=%v", ex.KnowledgeSet, ex.SetMatched, tc.set, tc.matched)
			}
			if !reflect.DeepEqual(ex.Scopes, tc.scopes) {
				t.Errorf("scopes = %v, want %v", ex.Scopes, tc.scopes)
			}
			if !reflect.DeepEqual(ex.Players, tc.players) {
				t.Errorf("players = %v, want %v", ex.Players, tc.players)
			}
		})
	}
}

func TestExtractContextAcrossMessages(t *testing.T) {
	t.Parallel()
	p := ra3Pack(t)
	ex := ExtractContextTexts(p, []string{
		"Mod: corona\n",
		"地图: map_mp_2_rao1\n玩家: X (神州); Y (苏联)\n",
		"Mod: default\n玩家: Z (盟军)\n", // later messages do not override earlier matches
	})
	want := Extracted{
		KnowledgeSet: "ra3-corona", SetMatched: true,
		Scopes:  Scopes{"factions": {"神州", "苏联"}, "maps": {"map_mp_2_rao1"}},
		Players: []Player{{"X", "神州"}, {"Y", "苏联"}},
	}
	if !reflect.DeepEqual(ex, want) {
		t.Fatalf("got %+v, want %+v", ex, want)
	}
}

func TestExtractContextWithoutRules(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	ex := ExtractContext(reg.Pack("dnd"), "Mod: corona\nDM: Roll initiative.\n")
	if !reflect.DeepEqual(ex, Extracted{}) {
		t.Fatalf("a pack without context rules extracted %+v", ex)
	}
}

func BenchmarkExtractContextLargeReplay(b *testing.B) {
	p := ra3Pack(b)
	data, err := os.ReadFile("testdata/replays/allied_vs_soviet.large.txt")
	if err != nil {
		b.Fatal(err)
	}
	text := string(data)
	b.ReportAllocs()
	for b.Loop() {
		if ex := ExtractContext(p, text); ex.KnowledgeSet != "ra3" {
			b.Fatal("wrong set")
		}
	}
}

// The worst case: a long text without a header, scanned up to the bound.
func BenchmarkExtractContextNoHeader(b *testing.B) {
	p := ra3Pack(b)
	data, err := os.ReadFile("testdata/replays/allied_vs_soviet.large.txt")
	if err != nil {
		b.Fatal(err)
	}
	text := string(data[strings.Index(string(data), "[操作记录]"):])
	b.ReportAllocs()
	for b.Loop() {
		if ex := ExtractContext(p, text); ex.SetMatched {
			b.Fatal("matched")
		}
	}
}

// The context rules' prefilters skip the operation lines of a log (they start with
// a time) and never a line the rule's regex matches.
func TestContextRulesPrefilter(t *testing.T) {
	t.Parallel()
	p := ra3Pack(t)
	c := &p.Context
	rules := map[string]struct {
		re    *regexp.Regexp
		start *lineStart
	}{
		"knowledge_set": {c.KnowledgeSet.Re, c.KnowledgeSet.start},
		"players":       {c.Players.Re, c.Players.start},
	}
	for dim, r := range c.Scopes {
		rules["scopes."+dim] = struct {
			re    *regexp.Regexp
			start *lineStart
		}{r.Re, r.start}
	}
	files, _ := filepath.Glob("testdata/replays/*.txt")
	for name, r := range rules {
		if r.start == nil || r.start.all {
			t.Fatalf("context rule %s has no prefilter", name)
		}
		matched, skipped := 0, 0
		for _, path := range files {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(b), "\n") {
				line = strings.TrimSuffix(line, "\r")
				admitted := r.start.admits(line)
				if r.re.MatchString(line) {
					matched++
					if !admitted {
						t.Fatalf("%s: the prefilter of rule %s rejects %q, which its regex matches", path, name, line)
					}
				} else if !admitted {
					skipped++
				}
			}
		}
		if matched == 0 || skipped == 0 {
			t.Errorf("rule %s: %d lines matched, %d skipped by the prefilter: want both", name, matched, skipped)
		}
	}
}

// TestExtractedScopesDoNotShareRoom: the dimensions' values share one backing
// array, each capped at its length, so that a caller appending to one
// dimension's values cannot overwrite another's; values keep their order and
// are deduplicated per dimension.
func TestExtractedScopesDoNotShareRoom(t *testing.T) {
	t.Parallel()
	p := ra3Pack(t)
	for _, text := range []string{
		"玩家: A (苏联); B (盟军); C (苏联)\n地图: map_mp_2_rao1\n",
		"地图: map_mp_2_rao1\n玩家: A (旭日帝国); B (帝国); C (神州)\n",
	} {
		ex := ExtractContext(p, text)
		if len(ex.Scopes) != 2 {
			t.Fatalf("%q: scopes %v", text, ex.Scopes)
		}
		want := map[string][]string{}
		for dim, values := range ex.Scopes {
			if cap(values) != len(values) {
				t.Errorf("%q: %s values %v have room for %d", text, dim, values, cap(values))
			}
			want[dim] = append([]string(nil), values...)
		}
		for dim := range ex.Scopes {
			_ = append(ex.Scopes[dim], "appended")
		}
		if !reflect.DeepEqual(map[string][]string(ex.Scopes), want) {
			t.Errorf("%q: appending changed the scopes: %v, want %v", text, ex.Scopes, want)
		}
	}
	ex := ExtractContext(p, "玩家: A (苏联); B (盟军); C (苏联)\n地图: map_mp_2_rao1\n")
	if got := ex.Scopes["factions"]; !reflect.DeepEqual(got, []string{"苏联", "盟军"}) {
		t.Errorf("factions %v, want [苏联 盟军]", got)
	}
}
