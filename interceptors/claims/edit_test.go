package claims

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestStrip(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	m := ra3Marker
	block := "```json\n" + claimsJSON + "\n```"
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"c08: prose before and after", loadCase(t, "c08_tolerant_format").Answer, "开局 PlayerA 大量生产步兵。\n\n以上声明之外的推测 {例如兵种比例} 不作保证。\n"},
		{"block at the end", "## 概览\n分析正文。\n\n" + m + "\n" + block + "\n", "## 概览\n分析正文。\n"},
		{"block at the end without final newline", "分析正文。\n\n" + m + "\n" + block, "分析正文。"},
		{"block at the start", m + "\n" + block + "\n\n正文在后。\n", "正文在后。\n"},
		{"decorated marker line", "分析。\n\n**" + m + "**：\n" + block + "\n", "分析。\n"},
		{"heading marker", "分析。\n\n### " + m + "\n\n" + block + "\n\n后记。\n", "分析。\n\n后记。\n"},
		{"marker inside a sentence", "分析。见下方" + m + "。\n\n" + block + "\n", "分析。见下方。\n"},
		{"CRLF", "分析。\r\n\r\n" + m + "\r\n```json\r\n" + claimsJSON + "\r\n```\r\n", "分析。\r\n"},
		{"no marker, fenced block adopted", "分析。\n\n" + block + "\n\n后记。", "分析。\n\n后记。"},
		{"bare group mid-sentence", "结论 " + claimsJSON + " 完毕。", "结论 完毕。"},
		{"marker without block", "分析。\n\n" + m + "\n", "分析。\n"},
		{"nothing to strip", "只有正文。\n", "只有正文。\n"},
		{"invalid block is stripped too", "分析。\n\n" + m + "\n```json\n{\"unitClaims\": [ oops\n```\n", "分析。\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := p.Parse(tc.content, Optional)
			got := Strip(tc.content, c)
			if got != tc.want {
				t.Fatalf("Strip =\n%q\nwant\n%q", got, tc.want)
			}
			if again := p.Parse(got, Optional); again.Found || again.Marker {
				t.Fatalf("stripped answer still has a block or marker: %q", got)
			}
		})
	}
	if got := Strip("其他内容", p.Parse(loadCase(t, "c01_clean").Answer, Optional)); got != "其他内容" {
		t.Fatalf("claims of another content changed it: %q", got)
	}
	if got := Strip("x", nil); got != "x" {
		t.Fatalf("nil claims changed the content: %q", got)
	}
}

func TestDowngrade(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	tests := []struct {
		name    string
		content string
		edits   []Edit
		check   func(t *testing.T, c *Claims)
	}{
		{
			name:    "c02: confirmed MCV becomes possible with the miner hub",
			content: loadCase(t, "c02_mcv_overconfident").Answer,
			edits:   []Edit{{Path: "unitClaims[0]", Level: "possible", AddAlternatives: []string{"AlliedMinerCommandHub", "AlliedMinerCommandHub", " "}}},
			check: func(t *testing.T, c *Claims) {
				u := c.UnitClaims[0]
				if u.Level != Possible || u.LevelRaw != "possible" {
					t.Errorf("level = %v (%q), want possible", u.Level, u.LevelRaw)
				}
				if !containsString(u.Alternatives, "AlliedMinerCommandHub") || countString(u.Alternatives, "AlliedMinerCommandHub") != 1 {
					t.Errorf("alternatives = %q, want the hub once", u.Alternatives)
				}
			},
		},
		{
			name:    "c08: comments dropped, other claims untouched",
			content: loadCase(t, "c08_tolerant_format").Answer,
			edits:   []Edit{{Path: "unitClaims[3]", Level: "UNCERTAIN", AddAlternatives: []string{"AlliedAntiVehicleInfantry", "AlliedEngineer <工程师> & \"x\""}}, {Path: "eventClaims[0]", Level: "highly_likely"}},
			check: func(t *testing.T, c *Claims) {
				if strings.Contains(c.Block, "//") {
					t.Errorf("the edited block keeps a comment")
				}
				u := c.UnitClaims[3]
				if !u.LevelKnown || u.Level != Uncertain || u.LevelRaw != "uncertain" {
					t.Errorf("unitClaims[3] level = %v %q", u.Level, u.LevelRaw)
				}
				if want := []string{"AlliedAntiVehicleInfantry", "AlliedEngineer <工程师> & \"x\""}; strings.Join(u.Alternatives, "|") != strings.Join(want, "|") {
					t.Errorf("alternatives = %q, want %q", u.Alternatives, want)
				}
				if !strings.Contains(c.Block, "<工程师> &") {
					t.Errorf("alternative escaped beyond JSON's needs: %s", c.Block)
				}
				if c.EventClaims[0].Level != HighlyLikely || c.EventClaims[0].LevelRaw != "highly likely" {
					t.Errorf("event level = %v %q", c.EventClaims[0].Level, c.EventClaims[0].LevelRaw)
				}
				if c.UnitClaims[0].UnitIDRaw != "900" || c.UnitClaims[4].Evidence[0].Raw != "1:23 选择了 904" {
					t.Errorf("unedited claims changed: %+v", c.UnitClaims[0])
				}
			},
		},
		{
			name:    "alternatives created when missing, lone string kept",
			content: fenced("分析。", `{"unitClaims": [{"unitId": 1, "claim": "A", "evidenceLevel": "confirmed"}, {"unitId": 2, "claim": "B", "evidenceLevel": "confirmed", "alternatives": "C"}]}`),
			edits:   []Edit{{Path: "unitClaims[0]", AddAlternatives: []string{"X"}}, {Path: "unitClaims[1]", Level: "possible", AddAlternatives: []string{"C", "D"}}},
			check: func(t *testing.T, c *Claims) {
				if got := strings.Join(c.UnitClaims[0].Alternatives, ","); got != "X" || c.UnitClaims[0].Level != Confirmed {
					t.Errorf("claim 0 alternatives %q level %v", got, c.UnitClaims[0].Level)
				}
				if got := strings.Join(c.UnitClaims[1].Alternatives, ","); got != "C,D" {
					t.Errorf("claim 1 alternatives %q, want C,D", got)
				}
			},
		},
		{
			// The block goes back into an answer that clients read line by line or
			// as JavaScript: the line separators are escaped, as encoding/json does.
			name:    "line separators in alternatives are escaped",
			content: fenced("分析。", `{"unitClaims": [{"unitId": 1, "claim": "A", "evidenceLevel": "confirmed"}, {"unitId": 2, "claim": "B", "evidenceLevel": "confirmed", "alternatives": ["C"]}]}`),
			edits:   []Edit{{Path: "unitClaims[0]", AddAlternatives: []string{"X\u2028Y"}}, {Path: "unitClaims[1]", AddAlternatives: []string{"D\u2029E"}}},
			check: func(t *testing.T, c *Claims) {
				if strings.ContainsAny(c.Block, "\u2028\u2029") || !strings.Contains(c.Block, `"X\u2028Y"`) || !strings.Contains(c.Block, `"D\u2029E"`) {
					t.Errorf("line separators not escaped in %s", c.Block)
				}
				if got := strings.Join(c.UnitClaims[0].Alternatives, ",") + "|" + strings.Join(c.UnitClaims[1].Alternatives, ","); got != "X\u2028Y|C,D\u2029E" {
					t.Errorf("alternatives %q", got)
				}
			},
		},
		{
			name:    "duplicate fields: the first counts, and the first is edited",
			content: fenced("分析。", `{"unitClaims": [{"unitId": 1, "claim": "A", "evidenceLevel": "confirmed", "evidenceLevel": "possible", "alternatives": ["B"], "alternatives": []}], "unitClaims": [], "unit\u0043laims": 3}`),
			edits:   []Edit{{Path: "unitClaims[0]", Level: "uncertain", AddAlternatives: []string{"C"}}},
			check: func(t *testing.T, c *Claims) {
				u := c.UnitClaims[0]
				if u.Level != Uncertain || strings.Join(u.Alternatives, ",") != "B,C" {
					t.Errorf("level %v alternatives %q, want uncertain and B,C", u.Level, u.Alternatives)
				}
			},
		},
		{
			name:    "CRLF block keeps CRLF",
			content: "分析。\r\n\r\n" + ra3Marker + "\r\n```json\r\n" + claimsJSON + "\r\n```\r\n",
			edits:   []Edit{{Path: "unitClaims[0]", Level: "possible"}},
			check: func(t *testing.T, c *Claims) {
				if strings.Contains(strings.ReplaceAll(c.Block, "\r\n", ""), "\n") {
					t.Errorf("bare line feed in a CRLF block: %q", c.Block)
				}
				if c.UnitClaims[0].Level != Possible {
					t.Errorf("level = %v", c.UnitClaims[0].Level)
				}
			},
		},
		{
			name: "false evidence removed, listed in needsConfirmation; the player the facts name",
			content: fenced("分析。", `{"unitClaims": [{"unitId": 733, "player": "PlayerB", "claim": "A", "evidenceLevel": "highly likely", "evidence": ["select|6:02.00|733", "power|6:02.00|X|733", "select|6:09.00|733"], "needsConfirmation": "已有"}],`+
				` "eventClaims": [{"claim": "E", "evidenceLevel": "confirmed", "evidence": "power|1:24.00|X|246"}]}`),
			edits: []Edit{
				{Path: "unitClaims[0]", Level: "ruled out", RemoveEvidence: []int{2, 1, 1}, AddNeedsConfirmation: []string{"未核实：power|6:02.00|X|733", "已有"}, Player: "PlayerA"},
				{Path: "eventClaims[0]", Level: "uncertain", RemoveEvidence: []int{0}, AddNeedsConfirmation: []string{"未核实：power|1:24.00|X|246"}},
			},
			check: func(t *testing.T, c *Claims) {
				u := c.UnitClaims[0]
				if u.Level != RuledOut || u.Player != "PlayerA" {
					t.Errorf("level %v player %q, want ruled out, PlayerA", u.Level, u.Player)
				}
				if len(u.Evidence) != 1 || u.Evidence[0].Raw != "select|6:02.00|733" {
					t.Errorf("evidence = %+v, want only the first item", u.Evidence)
				}
				if got := strings.Join(u.NeedsConfirmation, "|"); got != "已有|未核实：power|6:02.00|X|733" {
					t.Errorf("needsConfirmation = %q", got)
				}
				e := c.EventClaims[0]
				if len(e.Evidence) != 0 || e.Level != Uncertain || strings.Join(e.NeedsConfirmation, "|") != "未核实：power|1:24.00|X|246" {
					t.Errorf("event claim = %+v", e)
				}
			},
		},
		{
			name:    "bare group in prose",
			content: "结论 " + claimsJSON + " 完毕。",
			edits:   []Edit{{Path: "unitClaims[0]", Level: "ruled out"}},
			check: func(t *testing.T, c *Claims) {
				if c.UnitClaims[0].Level != RuledOut {
					t.Errorf("level = %v", c.UnitClaims[0].Level)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := p.Parse(tc.content, Required)
			got, err := Downgrade(tc.content, c, tc.edits)
			if err != nil {
				t.Fatalf("Downgrade: %v", err)
			}
			// The prose on both sides of the block is byte-identical.
			if !strings.HasPrefix(got, tc.content[:c.Span.Start]) || !strings.HasSuffix(got, tc.content[c.Span.End:]) {
				t.Fatalf("prose changed:\n%q", got)
			}
			again := p.Parse(got, Required)
			if !again.Usable() || again.Span.Start != c.Span.Start || again.Fenced != c.Fenced || again.Marker != c.Marker {
				t.Fatalf("re-parse: usable=%v span %v (was %v) issues %v", again.Usable(), again.Span, c.Span, issueKeys(again.Issues))
			}
			if len(again.UnitClaims) != len(c.UnitClaims) || len(again.EventClaims) != len(c.EventClaims) {
				t.Fatalf("claim counts changed")
			}
			tc.check(t, again)
			if Strip(got, again) != Strip(tc.content, c) {
				t.Fatalf("the prose of the downgraded answer differs:\n%q\n%q", Strip(got, again), Strip(tc.content, c))
			}
		})
	}
}

// TestDowngradeRemovesClaims checks Edit.Remove: the removed claims leave their
// arrays, every other claim keeps its JSON (unknown fields and field order
// included), edits of the claims after a removed one apply to the claims as
// parsed, and the prose is byte-identical.
func TestDowngradeRemovesClaims(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	content := fenced("分析：900 是步兵，901 是基地车，902 是矿车，903 是飞机。", `{"unitClaims": [
  {"unitId": 900, "claim": "A", "evidenceLevel": "confirmed", "x-note": {"keep": [1, 2]}},
  {"unitId": 901, "claim": "B", "evidenceLevel": "possible", "alternatives": ["C"]},
  {"unitId": 902, "claim": "C", "evidenceLevel": "highly likely", "evidence": ["select|1:00.00|902", "select|1:10.00|902"], "z": true},
  {"unitId": 903, "claim": "D", "evidenceLevel": "confirmed"},
  {"unitId": 904, "claim": "E", "evidenceLevel": "confirmed", "source": "log"}
], "eventClaims": [{"claim": "E1", "evidenceLevel": "confirmed", "evidence": "power|1:24.00|X|246"}, {"claim": "E2", "evidenceLevel": "possible", "extra": 1}],
 "timelineClaims": [{"claim": "T1", "evidenceLevel": "confirmed"}], "meta": {"model": "m"}}`)
	c := p.Parse(content, Required)
	if !c.Usable() {
		t.Fatalf("the fixture does not parse: %v", issueKeys(c.Issues))
	}
	edits := []Edit{
		{Path: "unitClaims[3]", Remove: true},
		{Path: "unitClaims[2]", Level: "possible", RemoveEvidence: []int{1}, AddNeedsConfirmation: []string{"n"}},
		{Path: "unitClaims[1]", Remove: true, Level: "ruled out"}, // the other fields of a removal are ignored
		{Path: "eventClaims[0]", Remove: true},
		{Path: "unitClaims[3]", Remove: true}, // twice: removed once
		{Path: "unitClaims[4]", AddAlternatives: []string{"F"}},
		{Path: "timelineClaims[0]", Remove: true},
	}
	got, err := Downgrade(content, c, edits)
	if err != nil {
		t.Fatalf("Downgrade: %v", err)
	}
	if !strings.HasPrefix(got, content[:c.Span.Start]) || !strings.HasSuffix(got, content[c.Span.End:]) {
		t.Fatalf("prose changed:\n%q", got)
	}
	again := p.Parse(got, Required)
	if !again.Usable() || again.Span.Start != c.Span.Start {
		t.Fatalf("re-parse: usable=%v issues %v\n%s", again.Usable(), issueKeys(again.Issues), got)
	}
	if Strip(got, again) != Strip(content, c) {
		t.Fatalf("the prose of the downgraded answer differs")
	}
	var units []string
	for _, u := range again.UnitClaims {
		units = append(units, u.UnitIDRaw)
	}
	if strings.Join(units, ",") != "900,902,904" || len(again.EventClaims) != 1 || again.EventClaims[0].Claim != "E2" || len(again.TimelineClaims) != 0 {
		t.Fatalf("claims left: units %v, events %+v, timeline %+v", units, again.EventClaims, again.TimelineClaims)
	}
	// Untouched claims keep their JSON as it was (compared without whitespace).
	ugly := func(doc, path string) string { return gjson.Get(doc, path+"|@ugly").Raw }
	for _, same := range [][2]string{{"unitClaims.0", "unitClaims.0"}, {"eventClaims.1", "eventClaims.0"}, {"meta", "meta"}} {
		if before, after := ugly(c.JSON, same[0]), ugly(again.JSON, same[1]); before != after || before == "" {
			t.Errorf("%s changed: %s → %s", same[0], before, after)
		}
	}
	// The edits of claims after a removed one reached the claims they named.
	mid := again.UnitClaims[1]
	if mid.Level != Possible || len(mid.Evidence) != 1 || mid.Evidence[0].Raw != "select|1:00.00|902" || strings.Join(mid.NeedsConfirmation, ",") != "n" ||
		!gjson.Get(again.JSON, "unitClaims.1.z").Bool() {
		t.Errorf("unitClaims[2] as parsed (now [1]) = %+v", mid)
	}
	last := again.UnitClaims[2]
	if strings.Join(last.Alternatives, ",") != "F" || gjson.Get(again.JSON, "unitClaims.2.source").Str != "log" {
		t.Errorf("unitClaims[4] as parsed (now [2]) = %+v", last)
	}
	if !strings.Contains(again.Block, `"timelineClaims": []`) {
		t.Errorf("the emptied array is not kept empty:\n%s", again.Block)
	}
	// A removal of a claim that is not there is an error, like any other edit.
	if _, err := Downgrade(content, c, []Edit{{Path: "unitClaims[5]", Remove: true}}); err == nil || !strings.Contains(err.Error(), "no such claim") {
		t.Errorf("removing a claim that is not there: %v", err)
	}
}

func TestDowngradeErrors(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	c08 := loadCase(t, "c08_tolerant_format").Answer
	parsed := p.Parse(c08, Required)
	tests := []struct {
		name    string
		content string
		claims  *Claims
		edits   []Edit
		want    string
	}{
		{"not a claim path", c08, parsed, []Edit{{Path: "unitClaims[0].evidence[0]", Level: "possible"}}, `path "unitClaims[0].evidence[0]" is not a claim path`},
		{"unknown array", c08, parsed, []Edit{{Path: "units[0]", Level: "possible"}}, "is not a claim path"},
		{"truncated claim", c08, parsed, []Edit{{Path: "unitClaims[10]", Level: "possible"}}, "unitClaims[10]: no such claim (10 kept in unitClaims)"},
		{"unknown level", c08, parsed, []Edit{{Path: "unitClaims[0]", Level: "likely"}}, `unknown evidence level "likely"`},
		{"alternatives on an event claim", c08, parsed, []Edit{{Path: "eventClaims[0]", AddAlternatives: []string{"x"}}}, "only unit claims have alternatives"},
		{"a player on an event claim", c08, parsed, []Edit{{Path: "eventClaims[0]", Player: "PlayerA"}}, "only unit claims name a player"},
		{"an evidence item the claim does not have", c08, parsed, []Edit{{Path: "unitClaims[0]", RemoveEvidence: []int{7}}}, "no evidence item at position 7"},
		{"other content", "别的答案", parsed, []Edit{{Path: "unitClaims[0]", Level: "possible"}}, "not the one the claims were parsed from"},
		{"no block", "无", p.Parse("无", Optional), []Edit{{Path: "unitClaims[0]", Level: "possible"}}, "no valid claims block"},
		{"nil claims", c08, nil, nil, "no valid claims block"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Downgrade(tc.content, tc.claims, tc.edits)
			if err == nil || !strings.Contains(err.Error(), tc.want) || got != "" {
				t.Fatalf("Downgrade = %q, %v; want an error containing %q", got, err, tc.want)
			}
		})
	}
	if got, err := Downgrade(c08, parsed, nil); err != nil || got != c08 {
		t.Fatalf("no edits changed the content: %v", err)
	}
}

func TestClaimPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"unitClaims[2]", "unitClaims[2]"},
		{"eventClaims[0].evidence[1]", "eventClaims[0]"},
		{"timelineClaims[12].evidence[0]", "timelineClaims[12]"},
		{"unitClaims", ""},
		{"", ""},
		// Any declared kind's claims have paths (claims.kinds names are JSON keys).
		{"orderClaims[0].amount", "orderClaims[0]"},
		{"order claims[0]", ""},
		{"[0]", ""},
		{"0x[1]", ""},
		{"unitClaims[x]", ""},
		{"unitClaims[1]x", ""},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			if got := ClaimPath(tc.in); got != tc.want {
				t.Fatalf("ClaimPath(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func containsString(list []string, s string) bool { return countString(list, s) > 0 }

func countString(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

func TestStripBlockMatchesStripOfAParse(t *testing.T) {
	t.Parallel()
	p, err := NewParser(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{
		"prose\n\n[机器可读声明]\n```json\n{\"unitClaims\": []}\n```\n",
		"prose {not json} and {\"unitClaims\": [{\"unitId\": 1}]} after",
		"no block at all",
		"",
		"```json\n{\"eventClaims\": [],}\n```\ntrailing {prose}",
	} {
		if got, want := p.StripBlock(content), Strip(content, p.Parse(content, Optional)); got != want {
			t.Errorf("StripBlock(%q) = %q, want %q", content, got, want)
		}
	}
}

// TestDowngradeKeepsAOneLineBlockOnOneLine: a block written on one line is
// rewritten on one line, so the markdown around it keeps its meaning. Pretty-
// printed, the block on a fence's opening line (found by the fallback; FuzzParse
// found this) became that unclosed fence's body, and the downgraded answer no
// longer parsed; in a list item it broke the item.
func TestDowngradeKeepsAOneLineBlockOnOneLine(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	for _, content := range []string{
		"[机器可读声明]\n~~~json{\"unitClaims\":[{}]}0",
		"分析如下。\n\n- 声明：{\"unitClaims\":[{\"unitId\":900,\"claim\":\"基地车\",\"evidenceLevel\":\"confirmed\"}]}\n- 其他\n",
	} {
		c := p.Parse(content, Required)
		if !c.Usable() || len(c.UnitClaims) == 0 {
			t.Fatalf("%q does not parse: %v", content, issueKeys(c.Issues))
		}
		out, err := Downgrade(content, c, []Edit{{Path: "unitClaims[0]", Level: "possible", AddAlternatives: []string{"AlliedMiner"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Count(out, "\n"), strings.Count(content, "\n"); got != want {
			t.Errorf("the downgraded answer has %d line breaks, the answer %d:\n%s", got, want, out)
		}
		again := p.Parse(out, Required)
		if !again.Usable() || len(again.UnitClaims) == 0 {
			t.Fatalf("the downgraded answer does not parse: %v\n%q", issueKeys(again.Issues), out)
		}
		if u := again.UnitClaims[0]; u.Level != Possible || !containsString(u.Alternatives, "AlliedMiner") {
			t.Errorf("downgraded claim: level %v, alternatives %q", u.Level, u.Alternatives)
		}
	}
}

// withBreak is the concatenation it saves, wherever the prefix ends.
func TestWithBreakIsConcatenation(t *testing.T) {
	t.Parallel()
	for _, s := range append(fuzzSeeds(t), "a\r\n", "a\n\r\n", "\n", "") {
		for k := 0; k <= len(s); k++ {
			for _, br := range []string{"\n", "\r\n"} {
				if got, want := withBreak(s, s[:k], br), s[:k]+br; got != want {
					t.Fatalf("withBreak(%q, %q, %q) = %q, want %q", s, s[:k], br, got, want)
				}
			}
		}
	}
}
