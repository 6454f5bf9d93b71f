package claims

import (
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

func TestParseUnitID(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	tests := []struct {
		name   string
		value  string // JSON text of unitId; "" leaves the field out
		want   int64
		ok     bool
		rawArg string
	}{
		{"number", `246`, 246, true, "246"},
		{"string of digits", `"900"`, 900, true, "900"},
		{"string with blanks", `" 901 "`, 901, true, " 901 "},
		{"whole float", `246.0`, 246, true, "246.0"},
		{"exponent", `2.46e2`, 246, true, "2.46e2"},
		{"zero", `0`, 0, true, "0"},
		{"fraction", `246.5`, 0, false, "246.5"},
		{"negative", `-3`, 0, false, "-3"},
		{"signed string", `"+5"`, 0, false, "+5"},
		{"garbage string", `"[UnitId]246"`, 0, false, "[UnitId]246"},
		{"empty string", `""`, 0, false, ""},
		{"overflowing string", `"99999999999999999999"`, 0, false, "99999999999999999999"},
		{"huge number", `1e30`, 0, false, "1e30"},
		{"boolean", `true`, 0, false, "true"},
		{"null", `null`, 0, false, "null"},
		{"object", `{"id": 1}`, 0, false, `{"id": 1}`},
		{"missing", ``, 0, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			field := ""
			if tc.value != "" {
				field = `"unitId": ` + tc.value + `, `
			}
			c := p.Parse(fenced("", `{"unitClaims": [{`+field+`"claim": "AlliedMCV", "evidenceLevel": "possible", "alternatives": ["AlliedMiner"]}]}`), Required)
			if !c.Usable() || len(c.UnitClaims) != 1 {
				t.Fatalf("parse failed: %v", issueKeys(c.Issues))
			}
			u := c.UnitClaims[0]
			if u.HasUnitID != tc.ok || u.UnitID != tc.want {
				t.Fatalf("unitId %s = %d (has=%v), want %d (has=%v)", tc.value, u.UnitID, u.HasUnitID, tc.want, tc.ok)
			}
			var missing []interceptors.Issue
			for _, is := range c.Issues {
				if is.Code == CodeUnitMissingID {
					missing = append(missing, is)
				}
			}
			if tc.ok {
				if len(missing) != 0 || len(c.Issues) != 0 {
					t.Fatalf("usable unitId reported: %v", issueKeys(c.Issues))
				}
				return
			}
			if len(missing) != 1 || missing[0].Severity != interceptors.Warning || missing[0].Path != "unitClaims[0]" {
				t.Fatalf("want one Warning unit.missing_id at unitClaims[0], got %v", issueKeys(c.Issues))
			}
			if got := missing[0].Args["unit"]; got != tc.rawArg {
				t.Errorf("Args[unit] = %q, want %q", got, tc.rawArg)
			}
		})
	}
}

func TestParseLevelSpellings(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	tests := []struct {
		name  string
		value string // JSON text of evidenceLevel; "" leaves it out
		want  Level
		known bool
	}{
		{"confirmed", `"confirmed"`, Confirmed, true},
		{"upper case", `"CONFIRMED"`, Confirmed, true},
		{"highly likely", `"highly likely"`, HighlyLikely, true},
		{"title case underscore", `"Highly_Likely"`, HighlyLikely, true},
		{"hyphen", `"highly-likely"`, HighlyLikely, true},
		{"two spaces", `"highly  likely"`, HighlyLikely, true},
		{"no separator", `"HighlyLikely"`, HighlyLikely, true},
		{"padded", `"  possible "`, Possible, true},
		{"uncertain", `"Uncertain"`, Uncertain, true},
		{"ruled out shouting hyphen", `"RULED-OUT"`, RuledOut, true},
		{"ruled out", `"ruled out"`, RuledOut, true},
		{"chinese confirmed", `"确认"`, Confirmed, true},
		{"chinese highly likely", `"很可能"`, HighlyLikely, true},
		{"chinese possible", `"可能"`, Possible, true},
		{"chinese uncertain", `"不确定"`, Uncertain, true},
		{"chinese ruled out", `"排除"`, RuledOut, true},
		{"likely is unknown", `"likely"`, Uncertain, false},
		{"empty is unknown", `""`, Uncertain, false},
		{"missing is unknown", ``, Uncertain, false},
		{"number is unknown", `3`, Uncertain, false},
		{"null is unknown", `null`, Uncertain, false},
		{"very long is unknown", `"` + strings.Repeat("confirmed", 20) + `"`, Uncertain, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			field := ""
			if tc.value != "" {
				field = `, "evidenceLevel": ` + tc.value
			}
			body := `{"eventClaims": [{"claim": "PlayerA 主基地打包"` + field + `, "evidence": ["power|1:24|SpecialPower_PackReplaceSelf|246"]}]}`
			c := p.Parse(fenced("", body), Required)
			if len(c.EventClaims) != 1 {
				t.Fatalf("parse failed: %v", issueKeys(c.Issues))
			}
			e := c.EventClaims[0]
			if e.Level != tc.want || e.LevelKnown != tc.known {
				t.Fatalf("level %s = %v (known=%v), want %v (known=%v)", tc.value, e.Level, e.LevelKnown, tc.want, tc.known)
			}
			wantIssues := ""
			if !tc.known {
				wantIssues = "claims.unknown_evidence_level|Info|eventClaims[0]"
			}
			if got := joinKeys(issueKeys(c.Issues)); got != wantIssues {
				t.Fatalf("issues = %q, want %q", got, wantIssues)
			}
			if !tc.known && c.Issues[0].Args["level"] != e.LevelRaw {
				t.Errorf("Args[level] = %q, want the raw value %q", c.Issues[0].Args["level"], e.LevelRaw)
			}
		})
	}
}

func TestLevelHelpers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		level                      Level
		name                       string
		confident, hedged, ruleOut bool
	}{
		{Confirmed, "confirmed", true, false, false},
		{HighlyLikely, "highly likely", true, false, false},
		{Possible, "possible", false, true, false},
		{Uncertain, "uncertain", false, true, false},
		{RuledOut, "ruled out", false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.level.String() != tc.name || tc.level.AtLeastHighlyLikely() != tc.confident || tc.level.Hedged() != tc.hedged || tc.level.RulesOut() != tc.ruleOut {
				t.Fatalf("%v: String=%q AtLeastHighlyLikely=%v Hedged=%v RulesOut=%v", tc.level, tc.level.String(), tc.level.AtLeastHighlyLikely(), tc.level.Hedged(), tc.level.RulesOut())
			}
			var back Level
			text, _ := tc.level.MarshalText()
			if err := back.UnmarshalText(text); err != nil || back != tc.level {
				t.Fatalf("text round trip of %v: %v, %v", tc.level, back, err)
			}
			if l, ok := ParseLevel(strings.ToUpper(strings.ReplaceAll(tc.name, " ", "_"))); !ok || l != tc.level {
				t.Fatalf("ParseLevel of the shouted spelling = %v, %v", l, ok)
			}
		})
	}
	if _, ok := ParseLevel("确认"); ok {
		t.Error("the package-level ParseLevel must not know a pack's spellings")
	}
}

func TestParseFormatIssues(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	tests := []struct {
		name    string
		content string
		req     Requirement
		want    []string // issue keys, sorted
		args    map[string]string
	}{
		{"missing, required", "没有声明。", Required, []string{"claims.missing|Fatal|"}, map[string]string{"marker": ra3Marker}},
		{"missing, optional", "没有声明。", Optional, []string{"claims.missing|Warning|"}, nil},
		{"marker without block", "分析。\n" + ra3Marker + "\n", Required, []string{"claims.missing|Fatal|"}, nil},
		{"invalid JSON", fenced("", `{"unitClaims": [ {"unitId": 1 "claim": "x"} ]}`), Required, []string{"claims.json_invalid|Fatal|"}, nil},
		{"unterminated comment", fenced("", `{"unitClaims": [] /* oops`), Required, []string{"claims.json_invalid|Fatal|"}, map[string]string{"error": "unterminated /* comment starting at byte 18"}},
		{"nesting too deep", fenced("", `{"unitClaims": `+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`}`), Required, []string{"claims.json_invalid|Fatal|"}, nil},
		{"blank block with comment", fenced("", "// nothing here"), Required, []string{"claims.json_invalid|Fatal|"}, map[string]string{"error": "the block is empty"}},
		{"block over the size limit", fenced("", `{"unitClaims": [], "x": "`+strings.Repeat("a", MaxBlockBytes)+`"}`), Required, []string{"claims.json_invalid|Fatal|"}, nil},
		{"array root", fenced("", `[{"unitId": 1}]`), Required, []string{"claims.root_not_object|Fatal|"}, map[string]string{"got": "array"}},
		{"string root", fenced("", `"claims"`), Required, []string{"claims.root_not_object|Fatal|"}, map[string]string{"got": "string"}},
		{"broken fallback block", `结论 {"unitClaims": [ {"unitId": 1 "claim": "x"} ]}`, Required, []string{"claims.json_invalid|Fatal|"}, nil},
		{"empty object is fine", fenced("", `{}`), Required, nil, nil},
		{"unknown fields ignored, any order", fenced("", `{"summary": {"x": [1]}, "timelineClaims": [{"evidence": [], "evidenceLevel": "possible", "claim": "t", "time": "1:00"}], "unitClaims": null}`), Required, nil, nil},
		{"missing id and claim", fenced("", `{"unitClaims": [{"player": "PlayerA", "evidenceLevel": "possible", "alternatives": ["x"]}]}`), Required,
			[]string{"unit.missing_claim|Warning|unitClaims[0]", "unit.missing_id|Warning|unitClaims[0]"}, nil},
		{"non-object claim keeps paths aligned", fenced("", `{"unitClaims": ["AlliedMCV", {"unitId": 5, "claim": "AlliedMiner", "evidenceLevel": "possible", "alternatives": ["x"]}]}`), Required,
			[]string{"claims.unknown_evidence_level|Info|unitClaims[0]", "unit.missing_claim|Warning|unitClaims[0]", "unit.missing_id|Warning|unitClaims[0]"}, nil},
		{"event alias", fenced("", `{"eventClaims": [{"event": "打包", "evidenceLevel": "possible"}]}`), Required, []string{"claims.field_alias|Info|eventClaims[0]"}, map[string]string{"alias": "event", "field": "claim"}},
		{"claim beats event without alias", fenced("", `{"eventClaims": [{"claim": "打包", "event": "别的", "evidenceLevel": "possible"}]}`), Required, nil, nil},
		{"event is no alias in timelineClaims", fenced("", `{"timelineClaims": [{"event": "打包", "evidenceLevel": "possible"}]}`), Required, nil, nil},
		{"event and timeline caps", fenced("", `{"eventClaims": [`+repeatJoin(`{"claim": "e", "evidenceLevel": "possible"}`, 7)+`], "timelineClaims": [`+repeatJoin(`{"claim": "t", "evidenceLevel": "possible"}`, 4)+`]}`), Required,
			[]string{"claims.truncated|Info|eventClaims", "claims.truncated|Info|timelineClaims"}, nil},
		{"at the cap is no truncation", fenced("", `{"timelineClaims": [`+repeatJoin(`{"claim": "t", "evidenceLevel": "possible"}`, 3)+`]}`), Required, nil, nil},
		{"non-string evidence item", fenced("", `{"eventClaims": [{"claim": "e", "evidenceLevel": "possible", "evidence": [42, "sell|3:10|512"]}]}`), Required,
			[]string{"evidence.unstructured|Info|eventClaims[0].evidence[0]"}, map[string]string{"evidence": "42"}},
		{"wrong arity", fenced("", `{"eventClaims": [{"claim": "e", "evidenceLevel": "possible", "evidence": ["sell|3:10|512|extra"]}]}`), Required,
			[]string{"evidence.unstructured|Info|eventClaims[0].evidence[0]"}, map[string]string{"evidence": "sell|3:10|512|extra"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := p.Parse(tc.content, tc.req)
			if got, want := joinKeys(issueKeys(c.Issues)), joinKeys(tc.want); got != want {
				t.Fatalf("issues:\n%s\nwant:\n%s", got, want)
			}
			for k, v := range tc.args {
				if got := c.Issues[0].Args[k]; got != v {
					t.Errorf("Args[%q] = %q, want %q", k, got, v)
				}
			}
			fatal := false
			for _, is := range c.Issues {
				fatal = fatal || is.Severity == interceptors.Fatal
				if is.Message == "" {
					t.Errorf("%s has no message", is.Code)
				}
			}
			if fatal == c.Usable() && c.Found {
				t.Errorf("Usable() = %v with a Fatal issue = %v", c.Usable(), fatal)
			}
		})
	}
}

func repeatJoin(s string, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = s
	}
	return strings.Join(parts, ", ")
}

func TestParseClaimFields(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	body := "\uFEFF{\r\n" +
		"  // 第一条\r\n" +
		`  "unitClaims": [{"unitId": 587, "unitId": 999, "player": " PlayerA ", "claim": " AlliedMCV ", "evidenceLevel": "Highly_Likely",` + "\r\n" +
		`    "evidence": ["power | 1:41.00 | SpecialPower_UnpackReplaceSelf | 587", "select|1:30.1|587",],` + "\r\n" +
		`    "alternatives": "AlliedMiner 展开后的指挥中心", "needsConfirmation": ["587 之后是否作为建造者出现", "", 7]},],` + "\r\n" +
		`  "timelineClaims": [{"claim": "迁移", "evidenceLevel": "确认", "evidence": "move|1:31|2200.0,1500.0,0.0"}], /* 结束 */` + "\r\n" +
		"}"
	content := "分析。\r\n\r\n" + ra3Marker + "\r\n```json\r\n" + body + "\r\n```\r\n"
	c := p.Parse(content, Required)
	if len(c.Issues) != 0 || !c.Usable() {
		t.Fatalf("issues: %v", issueKeys(c.Issues))
	}
	u := c.UnitClaims[0]
	if u.UnitID != 587 || u.Player != "PlayerA" || u.Claim != "AlliedMCV" || u.Level != HighlyLikely || u.LevelRaw != "Highly_Likely" {
		t.Errorf("unit claim = %+v (the first unitId wins, text is trimmed)", u)
	}
	if len(u.Evidence) != 2 || u.Evidence[0].Type != "power" || u.Evidence[0].TimeRaw != "1:41.00" || strings.Join(u.Evidence[0].Params, "|") != "SpecialPower_UnpackReplaceSelf|587" {
		t.Errorf("evidence = %+v", u.Evidence)
	}
	if u.Evidence[1].Path != "unitClaims[0].evidence[1]" || u.Evidence[1].Time.Milliseconds() != 90100 {
		t.Errorf("second evidence = %+v", u.Evidence[1])
	}
	if len(u.Alternatives) != 1 || u.Alternatives[0] != "AlliedMiner 展开后的指挥中心" {
		t.Errorf("a lone alternative string = %q, want one item", u.Alternatives)
	}
	if len(u.NeedsConfirmation) != 1 {
		t.Errorf("needsConfirmation = %q, want blank and non-string items skipped", u.NeedsConfirmation)
	}
	tl := c.TimelineClaims[0]
	if tl.Level != Confirmed || len(tl.Evidence) != 1 || tl.Evidence[0].Type != "move" || tl.Evidence[0].Path != "timelineClaims[0].evidence[0]" {
		t.Errorf("timeline claim = %+v", tl)
	}
	if strings.Contains(c.JSON, "//") || strings.Contains(c.JSON, "\uFEFF") {
		t.Errorf("normalised JSON keeps a comment or BOM: %q", c.JSON)
	}
}

func TestParseCustomCapsAndFreeTextEvidence(t *testing.T) {
	t.Parallel()
	p, err := NewParser(&knowledge.ClaimsContract{Caps: map[string]int{UnitClaimsField: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Cap(UnitClaimsField) != 2 || p.Cap(EventClaimsField) != DefaultEventClaimsCap || p.Marker() != "" {
		t.Fatalf("caps %d/%d, marker %q", p.Cap(UnitClaimsField), p.Cap(EventClaimsField), p.Marker())
	}
	unit := `{"unitId": 1, "claim": "x", "evidenceLevel": "possible", "alternatives": ["y"], "evidence": ["看到了它"]}`
	c := p.Parse("答案：\n```json\n{\"unitClaims\": ["+repeatJoin(unit, 3)+"]}\n```", Required)
	if got := joinKeys(issueKeys(c.Issues)); got != "claims.truncated|Info|unitClaims" {
		t.Fatalf("issues = %q; a pack without evidence types reports no evidence.unstructured", got)
	}
	if len(c.UnitClaims) != 2 || c.UnitClaims[1].Evidence[0].Structured || c.Issues[0].Args["cap"] != "2" || c.Issues[0].Args["count"] != "3" {
		t.Fatalf("claims %d, evidence %+v, args %v", len(c.UnitClaims), c.UnitClaims[1].Evidence, c.Issues[0].Args)
	}
}

func TestNewParserErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		contract *knowledge.ClaimsContract
		evidence map[string][]string
		want     string // substring of the error
	}{
		{"unknown cap", &knowledge.ClaimsContract{Caps: map[string]int{"unitclaims": 3}}, nil, `unknown cap "unitclaims"`},
		{"negative cap", &knowledge.ClaimsContract{Caps: map[string]int{EventClaimsField: -1}}, nil, "cap eventClaims is -1"},
		{"unknown level", &knowledge.ClaimsContract{Levels: map[string][]string{"likely": {"大概"}}}, nil, `unknown evidence level "likely"`},
		{"empty spelling", &knowledge.ClaimsContract{Levels: map[string][]string{"possible": {" "}}}, nil, `empty or over-long spelling " "`},
		{"ambiguous spelling", &knowledge.ClaimsContract{Levels: map[string][]string{"possible": {"Confirmed"}}}, nil, `spelling "Confirmed" of level "possible" already means "confirmed"`},
		{"evidence type with a bar", nil, map[string][]string{"a|b": {"x"}}, `evidence type "a|b"`},
		{"empty evidence type", nil, map[string][]string{"": {"x"}}, `evidence type ""`},
		{"evidence type twice", nil, map[string][]string{"Build": {"a"}, "build": {"a"}}, "declared twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewParser(tc.contract, tc.evidence)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := NewParser(nil, nil); err != nil {
		t.Fatalf("nil contract and evidence: %v", err)
	}
}

// trimSpace is strings.TrimSpace: its shortcut only skips texts TrimSpace
// returns as they are.
func TestTrimSpaceAsStrings(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", " ", "a", " a", "a ", "\ta\n", "\va\f", "AlliedMCV", "587 之后", "之后 587", "之后",
		"\u3000a", "a\u3000", "\u00a0x\u0085", "x\u2029", "\xff", "a\xff", "\xffa", "~!", "!\x7f", "\x7f",
	} {
		if got, want := trimSpace(s), strings.TrimSpace(s); got != want {
			t.Errorf("trimSpace(%q) = %q, want %q", s, got, want)
		}
	}
}

// The canonical spellings' shortcut reads them as the key and the map do, for
// any pack's parser.
func TestCanonicalLevelsAsKeys(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	for l := Uncertain; l <= RuledOut; l++ {
		var buf [maxLevelKey]byte
		k, _ := levelKey(l.String(), &buf)
		if got, ok := canonicalLevel(l.String()); !ok || got != l || p.levels[string(k)] != l {
			t.Errorf("%q: shortcut %v %v, the pack's map %v", l.String(), got, ok, p.levels[string(k)])
		}
	}
}
