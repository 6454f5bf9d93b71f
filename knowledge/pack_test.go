package knowledge

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// The issue codes of PRODUCT.md §8; the RA3 pack has a message for each.
var specIssueCodes = []string{
	"claims.missing", "claims.json_invalid", "claims.root_not_object", "claims.truncated",
	"claims.field_alias", "claims.unknown_evidence_level", "evidence.unstructured",
	"unit.missing_id", "unit.missing_claim", "claim.no_evidence", "claim.no_alternatives",
	"unit.not_observed", "evidence.not_in_replay", "evidence.out_of_range", "power.not_used",
	"player.mismatch", "asset.unknown", "asset.power_mismatch", "builder.not_observed",
	"evidence.ambiguous", "timeline.before_production", "revision.leak",
	"semantic.rejected", "semantic.failed",
}

func TestBuiltinPacksLoad(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range reg.Packs() {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"dnd", "orders", "ra3"}) {
		t.Fatalf("packs = %v", names)
	}
	if got := reg.SetNames(); !slices.Equal(got, []string{"dnd", "orders", "ra3", "ra3-corona"}) {
		t.Fatalf("sets = %v", got)
	}
	ra3 := reg.Pack("ra3")
	if ra3.DefaultSet != "ra3" || ra3.Language != "zh" || ra3.Facts == nil || ra3.Claims == nil || ra3.Dir != "embedded:ra3" {
		t.Fatalf("ra3 pack = %+v", ra3)
	}
	dnd := reg.Pack("dnd")
	if dnd.Facts != nil || dnd.Claims != nil || dnd.Language != "en" || dnd.Answer == nil || len(dnd.Semantic) != 1 {
		t.Fatalf("dnd pack: facts %v claims %v language %q answer %v semantic %d", dnd.Facts, dnd.Claims, dnd.Language, dnd.Answer, len(dnd.Semantic))
	}
	if _, p := reg.Set("ra3-corona"); p != ra3 {
		t.Fatal("ra3-corona does not resolve to the ra3 pack")
	}
	if s, p := reg.Set("nope"); s != nil || p != nil {
		t.Fatal("an unknown set resolved")
	}
}

// The fact rules must read every operation line of OPLOG.md exactly as documented.
func TestRA3FactRulesReadTheOplogExamples(t *testing.T) {
	t.Parallel()
	f := ra3Pack(t).Facts
	tests := []struct {
		line   string
		op     string
		fields map[string]string
		units  []string
	}{
		{"0:05.20 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)", "build",
			map[string]string{"time": "0:05.20", "player": "PlayerA", "asset": "AlliedPowerPlant", "unit": "246"}, nil},
		{"0:07.80 PlayerA 放置建筑 AlliedPowerPlant [UnitId]246(建造者) @ (1204.5,880.0,12.0)", "place",
			map[string]string{"time": "0:07.80", "player": "PlayerA", "asset": "AlliedPowerPlant", "unit": "246", "pos": "1204.5,880.0,12.0"}, nil},
		{"0:20.00 PlayerA 生产单位 AlliedMiner [UnitId]301(生产者)", "produce",
			map[string]string{"time": "0:20.00", "player": "PlayerA", "asset": "AlliedMiner", "unit": "301"}, nil},
		{"3:10.00 PlayerB 出售 [UnitId]512", "sell",
			map[string]string{"time": "3:10.00", "player": "PlayerB", "unit": "512"}, nil},
		{"1:30.10 PlayerA 选择 [UnitId]587 [UnitId]588", "select",
			map[string]string{"time": "1:30.10", "player": "PlayerA"}, []string{"587", "588"}},
		{"1:31.00 PlayerA 移动 @ (2200.0,1500.0,0.0)", "move",
			map[string]string{"time": "1:31.00", "player": "PlayerA", "pos": "2200.0,1500.0,0.0"}, nil},
		{"1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246", "power",
			map[string]string{"time": "1:24.00", "player": "PlayerA", "power": "SpecialPower_PackReplaceSelf", "unit": "246"}, nil},
		{"75:02.15 青龙 移动 @ (-10.5,3e2,0)", "move",
			map[string]string{"time": "75:02.15", "player": "青龙", "pos": "-10.5,3e2,0"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.op, func(t *testing.T) {
			t.Parallel()
			r, m := firstOp(f, tc.line)
			if r == nil || r.Op != tc.op {
				t.Fatalf("line %q: matched %v, want op %s", tc.line, r, tc.op)
			}
			for name, want := range tc.fields {
				if got := group(r.Re, m, tc.line, name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			if tc.units != nil {
				var got []string
				for _, um := range r.UnitsRe.FindAllStringSubmatch(group(r.Re, m, tc.line, "units"), -1) {
					got = append(got, um[1])
				}
				if !slices.Equal(got, tc.units) {
					t.Errorf("units = %v, want %v", got, tc.units)
				}
			}
		})
	}
	if m := f.DurationRe.FindStringSubmatch("录像时长: 14:32.40"); m == nil || m[f.DurationRe.SubexpIndex("time")] != "14:32.40" {
		t.Errorf("duration rule does not read 录像时长: %v", m)
	}
}

func firstOp(f *FactRules, line string) (*OpRule, []int) {
	for i := range f.Ops {
		if m := f.Ops[i].Re.FindStringSubmatchIndex(line); m != nil {
			return &f.Ops[i], m
		}
	}
	return nil, nil
}

func group(re *regexp.Regexp, m []int, line, name string) string {
	i := re.SubexpIndex(name)
	if i < 0 || m[2*i] < 0 {
		return ""
	}
	return line[m[2*i]:m[2*i+1]]
}

// Every operation line of every fixture replay is read by exactly one rule, and
// its verb agrees with the rule's op.
func TestRA3FactRulesReadEveryReplayLine(t *testing.T) {
	t.Parallel()
	f := ra3Pack(t).Facts
	verbs := map[string]string{"开始建造建筑": "build", "放置建筑": "place", "生产单位": "produce", "出售": "sell", "选择": "select", "移动": "move", "使用": "power"}
	opLine := regexp.MustCompile(`^\d+:\d{2}\.\d{2} `)
	files, _ := filepath.Glob("testdata/replays/*.txt")
	for _, path := range files {
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		n := 0
		for sc.Scan() {
			line := sc.Text()
			if !opLine.MatchString(line) {
				continue
			}
			n++
			var matched []string
			for _, r := range f.Ops {
				if r.Re.MatchString(line) {
					matched = append(matched, r.Op)
				}
			}
			want := verbs[strings.Fields(line)[2]]
			if len(matched) != 1 || matched[0] != want {
				t.Fatalf("%s: line %q matched %v, want exactly [%s]", path, line, matched, want)
			}
		}
		fh.Close()
		if n == 0 {
			t.Fatalf("%s: no operation lines", path)
		}
	}
}

func TestRA3MessagesCoverEverySpecCode(t *testing.T) {
	t.Parallel()
	p := ra3Pack(t)
	args := map[string]string{
		"unit": "587", "player": "Alice", "owner": "Boris", "asset": "AlliedMCV", "power": "SpecialPower_UnpackReplaceSelf",
		"evidence": "power|1:41.00|SpecialPower_UnpackReplaceSelf|587", "alternatives": "AlliedMiner", "level": "confirmed",
		"time": "1:41.00", "produced": "9:10.00", "end": "14:32.40", "used": "SpecialPower_PackReplaceSelf",
		"list": "unitClaims", "count": "12", "cap": "10", "alias": "event", "field": "claim", "marker": "[机器可读声明]",
		"error": "unexpected end", "got": "数组", "claim": "AlliedMCV", "scope": "盟军", "phrase": "抱歉",
		"validator": "combat", "verdict": "combat_should_be_added", "explanation": "x", "guidance": "改为 combat", "type": "power",
	}
	for _, code := range specIssueCodes {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			text, ok, err := p.FormatIssue(code, MessageData{Code: code, Path: "unitClaims[0]", Args: args})
			if err != nil || !ok {
				t.Fatalf("FormatIssue(%s) = %v, %v", code, ok, err)
			}
			for _, s := range []string{text.Message, text.Recommendation} {
				if strings.Contains(s, "<no value>") || strings.Contains(s, code) || strings.Contains(s, "unitClaims[0]") {
					t.Errorf("text shows a placeholder, code or path: %q", s)
				}
			}
			if text.Message == "" {
				t.Error("empty message")
			}
		})
	}
	// The ambiguity recommendation names the alternatives and the level to use.
	text, _, _ := p.FormatIssue("evidence.ambiguous", MessageData{Args: map[string]string{"unit": "587", "asset": "AlliedMCV", "power": "SpecialPower_UnpackReplaceSelf", "level": "confirmed", "alternatives": "AlliedMiner"}})
	if !strings.Contains(text.Message, "587") || !strings.Contains(text.Recommendation, "possible") || !strings.Contains(text.Recommendation, "AlliedMiner") {
		t.Fatalf("evidence.ambiguous = %+v", text)
	}
	// Missing arguments render empty, not "<no value>".
	text, _, err := p.FormatIssue("power.not_used", MessageData{})
	if err != nil || strings.Contains(text.Message, "<no value>") {
		t.Fatalf("without args: %+v, %v", text, err)
	}
	if _, ok, _ := p.FormatIssue("no.such_code", MessageData{}); ok {
		t.Fatal("an unknown code has a message")
	}
}

func TestRA3ContractStatesTheWholeSchema(t *testing.T) {
	t.Parallel()
	c := ra3Pack(t).Claims
	for _, want := range []string{
		"[机器可读声明]", "```json", "unitClaims", "eventClaims", "timelineClaims",
		"`unitId`", "`player`", "`claim`", "`evidenceLevel`", "`evidence`", "`alternatives`", "`needsConfirmation`",
		"最多 10 条", "最多 5 条", "最多 3 条",
		"`confirmed`", "`highly likely`", "`possible`", "`uncertain`", "`ruled out`",
		"build|时间|建筑名|建造者UnitId", "place|时间|建筑名|建造者UnitId|x,y,z", "produce|时间|单位名|生产者UnitId",
		"sell|时间|UnitId", "select|时间|UnitId", "move|时间|x,y,z", "power|时间|特殊能力名|UnitId",
	} {
		if !strings.Contains(c.ContractText, want) {
			t.Errorf("contract lacks %q", want)
		}
	}
	kinds := c.ClaimKinds()
	if len(kinds) != 3 || kinds[0].Cap != 10 || kinds[1].Cap != 5 || kinds[2].Cap != 3 {
		t.Errorf("kinds = %+v", kinds)
	}
	// The contract's example block is itself valid JSON of the schema.
	i := strings.LastIndex(c.ContractText, "```json\n")
	j := strings.LastIndex(c.ContractText, "\n```")
	var example struct {
		UnitClaims []struct {
			UnitID int `json:"unitId"`
		} `json:"unitClaims"`
	}
	if i < 0 || j < i || json.Unmarshal([]byte(c.ContractText[i+len("```json\n"):j]), &example) != nil || len(example.UnitClaims) != 1 {
		t.Error("the contract's example is not valid JSON")
	}
}

func TestRevisionTemplatesGolden(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/revision/*.golden")
	if len(files) == 0 {
		t.Fatal("no revision golden files")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			g := readGolden(t, path)
			p := reg.Pack(strings.TrimSpace(g.sections["pack"]))
			if p == nil {
				t.Fatalf("unknown pack %q", g.sections["pack"])
			}
			var data RevisionData
			if err := json.Unmarshal([]byte(g.sections["data"]), &data); err != nil {
				t.Fatal(err)
			}
			var out string
			if strings.TrimSpace(g.sections["template"]) == "repair" {
				out, err = p.RenderRepair(data)
			} else {
				out, err = p.RenderRevision(data)
			}
			if err != nil {
				t.Fatal(err)
			}
			g.check(t, out)
			for _, leak := range p.Revision.LeakPhrases {
				// The request itself may say "do not apologise", but must not apologise.
				if leak == "抱歉" || leak == "sorry" {
					if strings.Contains(strings.ToLower(out), leak) {
						t.Errorf("the request contains %q", leak)
					}
				}
			}
		})
	}
}

func TestDnDPolicyIsOneByteIdenticalAsset(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	p := reg.Pack("dnd")
	file, err := fs.ReadFile(builtinFS, "packs/dnd/combat-policy.md")
	if err != nil {
		t.Fatal(err)
	}
	policy := string(file)
	set, _ := reg.Set("dnd")
	entry, ok := set.Entry("", "", "combat-policy")
	switch {
	case !ok:
		t.Fatal("the dnd set has no combat-policy entry")
	case entry.Text != policy:
		t.Fatal("the set's policy entry differs from combat-policy.md")
	case p.AssetText["combat_policy"] != policy:
		t.Fatal("the pack asset differs from combat-policy.md")
	case p.Semantic[0].PolicyText != policy:
		t.Fatal("the combat validator's policy differs from combat-policy.md")
	case !strings.Contains(Render(set, nil), policy):
		t.Fatal("the rendered prompt does not contain the policy byte for byte")
	case !entry.HasTag("policy"):
		t.Fatal("the policy entry lacks the set's extra tag")
	}
	if strings.Contains(p.Answer.ContractText, "substantive active combat:") {
		t.Error("the answer contract repeats the policy's definition instead of referring to it")
	}
}

// The verdicts of the combat validator are consistent exactly as the fixtures'
// labels say: for a correct and a wrong proposal per labelled chunk.
func TestDnDVerdictConsistencyMatchesTheChunkLabels(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	v := reg.Pack("dnd").Semantic[0]
	ev := v.Evaluation
	if ev == nil || ev.SetFS == nil {
		t.Fatal("the dnd combat validator has no evaluation set")
	}
	files, _ := fs.Glob(ev.SetFS, "*.json")
	if len(files) == 0 {
		t.Fatal("no chunks")
	}
	for _, path := range files {
		var chunk map[string]any
		b, err := fs.ReadFile(ev.SetFS, path)
		if err != nil || json.Unmarshal(b, &chunk) != nil {
			t.Fatalf("%s: %v", path, err)
		}
		label, _ := chunk[ev.Label].(bool)
		correct, _ := chunk[ev.Correct].(string)
		if ev.Agrees(correct) != label {
			t.Fatalf("%s: %s %q contradicts %s %v", path, ev.Correct, correct, ev.Label, label)
		}
		for _, proposed := range []string{correct, ev.WrongFor(label)} {
			expected := "approved"
			switch {
			case label && proposed != "combat":
				expected = "combat_should_be_added"
			case !label && proposed == "combat":
				expected = "combat_should_be_removed"
			}
			if !v.Verdict(expected).Consistent(proposed) {
				t.Errorf("%s: the expected verdict %s is inconsistent with proposal %s", path, expected, proposed)
			}
			// A verdict that asks for the kind the proposal already has is inconsistent.
			if added := v.Verdict("combat_should_be_added").Consistent(proposed); added != (proposed != "combat") {
				t.Errorf("combat_should_be_added consistent=%v with proposal %s", added, proposed)
			}
			if removed := v.Verdict("combat_should_be_removed").Consistent(proposed); removed != (proposed == "combat") {
				t.Errorf("combat_should_be_removed consistent=%v with proposal %s", removed, proposed)
			}
		}
		if ev.Agrees(ev.WrongFor(label)) == label {
			t.Errorf("%s: the wrong proposal %q has the chunk's own label", path, ev.WrongFor(label))
		}
	}
	g, ok, err := v.RenderGuidance("combat_should_be_removed", GuidanceData{Proposed: "combat", Explanation: "They only plan the raid.", Target: v.Verdict("combat_should_be_removed").Target})
	if err != nil || !ok || !strings.Contains(g, "They only plan the raid.") || !strings.Contains(g, "narrative, recap or meta") {
		t.Fatalf("guidance = %q, %v, %v", g, ok, err)
	}
	if _, ok, _ := v.RenderGuidance("approved", GuidanceData{}); ok {
		t.Fatal("the approving verdict has guidance")
	}
}

// minimalPack is a valid pack; tests break one piece at a time.
func minimalPack() fstest.MapFS {
	return fstest.MapFS{
		"p/pack.yaml": {Data: []byte(`name: mini
language: en
knowledge_sets:
  mini: {file: sets/mini.json, dimensions: [factions]}
default_set: mini
context:
  knowledge_set: {regex: '^Set: (?P<value>\S+)$', default: mini}
facts:
  version: v1
  ops:
    - {op: build, regex: '^(?P<time>\S+) (?P<player>\S+) builds (?P<asset>\S+) (?P<unit>\d+)$'}
  evidence:
    build: [asset, unit]
claims:
  marker: '[claims]'
  contract: contract.md
  caps: {unitClaims: 10}
messages_file: messages.yaml
revision:
  template: revision.tmpl
  repair_template: revision.tmpl
`)},
		"p/sets/mini.json":  {Data: []byte(`{"global": {"entries": [{"id": "r", "tags": ["rule"], "text": "rule"}]}, "factions": {"a": {"entries": []}}}`)},
		"p/contract.md":     {Data: []byte("End with [claims].")},
		"p/messages.yaml":   {Data: []byte("unit.not_observed:\n  message: 'unit {{.Args.unit}} was never seen'\n")},
		"p/revision.tmpl":   {Data: []byte("{{range .Issues}}{{.N}}. {{.Message}}\n{{end}}")},
		"p/unused-file.txt": {Data: []byte("x")},
	}
}

func TestLoadPackErrorsNameTheFileAndKey(t *testing.T) {
	t.Parallel()
	if _, err := LoadPack(minimalPack(), "p"); err != nil {
		t.Fatalf("the minimal pack does not load: %v", err)
	}
	tests := []struct {
		name string
		file string
		edit func(string) string
		want string
	}{
		{"unknown key", "p/pack.yaml", func(s string) string { return s + "colour: red\n" }, "p/pack.yaml:22: colour: unknown key (known keys: name, description"},
		{"unknown nested key", "p/pack.yaml", func(s string) string { return strings.Replace(s, "caps:", "capz:", 1) }, "p/pack.yaml:17: claims.capz: unknown key (did you mean caps?)"},
		{"bad regex", "p/pack.yaml", func(s string) string { return strings.Replace(s, `(?P<unit>\d+)$`, `(?P<unit>\d+$`, 1) }, "p/pack.yaml: facts.ops[0].regex: error parsing regexp"},
		{"missing group", "p/pack.yaml", func(s string) string { return strings.Replace(s, "(?P<value>", "(", 1) }, "context.knowledge_set.regex"},
		{"unknown op group", "p/pack.yaml", func(s string) string { return strings.Replace(s, "(?P<asset>", "(?P<thing>", 1) }, `unknown group "thing"`},
		{"evidence param the rule does not capture", "p/pack.yaml", func(s string) string { return strings.Replace(s, "build: [asset, unit]", "build: [asset, pos]", 1) }, `facts.evidence.build: parameter "pos"`},
		{"evidence type without a rule", "p/pack.yaml", func(s string) string {
			return strings.Replace(s, "build: [asset, unit]", "build: [asset, unit]\n    sell: [unit]", 1)
		}, `facts.evidence.sell`},
		{"default set not declared", "p/pack.yaml", func(s string) string { return strings.Replace(s, "default_set: mini", "default_set: maxi", 1) }, `default_set: names set "maxi"`},
		{"missing file", "p/pack.yaml", func(s string) string { return strings.Replace(s, "contract: contract.md", "contract: contrat.md", 1) }, `p/pack.yaml: claims.contract: reading "contrat.md"`},
		{"file outside the pack", "p/pack.yaml", func(s string) string {
			return strings.Replace(s, "contract: contract.md", "contract: ../etc/passwd", 1)
		}, "must be a relative path inside the pack folder"},
		{"contract without the marker", "p/contract.md", func(string) string { return "no marker here" }, `p/contract.md: the contract text never mentions the marker "[claims]"`},
		{"message template syntax", "p/messages.yaml", func(string) string { return "x.y:\n  message: '{{.Args.unit'\n" }, "p/messages.yaml: x.y.message: template:"},
		{"message template field", "p/messages.yaml", func(string) string { return "x.y:\n  message: '{{.Argz.unit}}'\n" }, "p/messages.yaml: x.y.message: template:"},
		{"revision template field", "p/revision.tmpl", func(string) string { return "{{.Issuez}}" }, "p/revision.tmpl: template:"},
		{"set file error", "p/sets/mini.json", func(string) string { return `{"global": {"entries": [{"id": "r", "tags": ["rulez"], "text": "x"}]}}` }, `p/sets/mini.json:1:46: global: entry "r": tags[0]: unknown tag "rulez"`},
		{"cap not positive", "p/pack.yaml", func(s string) string { return strings.Replace(s, "unitClaims: 10", "unitClaims: 0", 1) }, "claims.caps.unitClaims: must be positive"},
		{"applies without a condition", "p/pack.yaml", func(s string) string { return s + "applies: {json_mode: true}\n" }, "p/pack.yaml: applies: no condition"},
		{"applies: a bad user_line", "p/pack.yaml", func(s string) string { return s + "applies: {user_line: '('}\n" }, "p/pack.yaml: applies.user_line: error parsing regexp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fsys := minimalPack()
			fsys[tc.file] = &fstest.MapFile{Data: []byte(tc.edit(string(fsys[tc.file].Data)))}
			_, err := LoadPack(fsys, "p")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
			var list PackErrors
			if !errors.As(err, &list) {
				t.Fatalf("error %T is not PackErrors", err)
			}
		})
	}
}

// withEvaluation adds an evaluation block to the semantic validator of
// TestLoadPackSemanticChecks's pack, with one "old|new" replacement applied to it.
func withEvaluation(edit string) func(string) string {
	return func(s string) string {
		block := `    evaluation:
      set: eval
      label: is_a
      correct: correct
      positive: [a]
      wrong: {when_true: b, when_false: a}
`
		if old, new, ok := strings.Cut(edit, "|"); ok {
			block = strings.Replace(block, old, new, 1)
		} else if edit != "" {
			block = strings.Replace(block, "      "+edit+"\n", "", 1)
		}
		return strings.Replace(s, "    guidance:\n", block+"    guidance:\n", 1)
	}
}

func TestLoadPackSemanticChecks(t *testing.T) {
	t.Parallel()
	base := `name: sem
language: en
knowledge_sets: {s: {file: s.json}}
default_set: s
assets: {policy: policy.md}
answer:
  fields: {kind: string}
  enums: {kind: [a, b]}
  contract: policy.md
semantic:
  - name: v
    source: {message: last_user}
    proposed: kind
    policy: policy
    instruction: policy.md
    max_explanation: 100
    verdicts:
      - {name: ok, approves: true}
      - {name: to_a, when_not_proposed: [a], target: a}
    guidance:
      to_a: 'must be {{.Target}}'
`
	tests := []struct {
		name string
		edit func(string) string
		want string
	}{
		{"valid", func(s string) string { return s }, ""},
		{"verdict value outside the enum", func(s string) string {
			return strings.Replace(s, "when_not_proposed: [a]", "when_not_proposed: [c]", 1)
		}, `value "c" is not one of answer.enums.kind`},
		{"no approving verdict", func(s string) string { return strings.Replace(s, "approves: true", "approves: false", 1) }, "exactly one verdict must approve"},
		{"unknown policy asset", func(s string) string { return strings.Replace(s, "policy: policy\n", "policy: polcy\n", 1) }, `names asset "polcy"`},
		{"guidance missing", func(s string) string { return strings.Replace(s, "to_a: 'must", "to_b: 'must", 1) }, `no guidance for rejecting verdict "to_a"`},
		{"guidance field", func(s string) string { return strings.Replace(s, "{{.Target}}", "{{.Targets}}", 1) }, "semantic[0].guidance.to_a: template:"},
		{"unknown source", func(s string) string { return strings.Replace(s, "last_user", "first_user", 1) }, `unknown source "first_user"`},
		{"an evaluation", withEvaluation(""), ""},
		{"an evaluation without a label field", withEvaluation("label: is_a"), "semantic[0].evaluation.label: missing"},
		{"a label field every chunk has", withEvaluation("label: is_a|label: note"), `semantic[0].evaluation.label: "note" is a field every chunk has already`},
		{"the label field twice", withEvaluation("correct: correct|correct: is_a"), `semantic[0].evaluation.correct: "is_a" is also the label field`},
		{"a positive value outside the enum", withEvaluation("positive: [a]|positive: [c]"), `semantic[0].evaluation.positive: value "c" is not one of answer.enums.kind`},
		{"a wrong proposal with the chunk's own label", withEvaluation("when_true: b|when_true: a"), `semantic[0].evaluation.wrong.when_true: "a" agrees with a true label`},
		{"a wrong proposal for false chunks that is not positive", withEvaluation("when_false: a|when_false: b"), `semantic[0].evaluation.wrong.when_false: "b" agrees with a false label`},
		{"no wrong proposal", withEvaluation("wrong: {when_true: b, when_false: a}|wrong: {when_true: b}"), "semantic[0].evaluation.wrong.when_false: missing"},
		{"a set folder without chunks", withEvaluation("set: eval|set: nothing-here"), `semantic[0].evaluation.set: folder "nothing-here": no *.json chunk files`},
		{"a set folder outside the pack", withEvaluation("set: eval|set: ../eval"), "must be a relative path inside the pack folder"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fsys := fstest.MapFS{
				"sem/pack.yaml":    {Data: []byte(tc.edit(base))},
				"sem/s.json":       {Data: []byte(`{"global": {"entries": [{"id": "p", "tags": [], "asset": "policy"}]}}`)},
				"sem/policy.md":    {Data: []byte("The policy.\n")},
				"sem/eval/c1.json": {Data: []byte(`{"id": "c1", "category": "c", "is_a": true, "correct": "a", "transcript": "t", "note": ""}`)},
			}
			p, err := LoadPack(fsys, "sem")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if e, _ := p.Set("s").Entry("", "", "p"); e.Text != "The policy.\n" {
					t.Fatalf("asset entry text = %q", e.Text)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLoadPackNoticeTemplate(t *testing.T) {
	t.Parallel()
	withNotice := func(tmpl string) fstest.MapFS {
		fsys := minimalPack()
		y := strings.Replace(string(fsys["p/pack.yaml"].Data), "  repair_template: revision.tmpl\n", "  repair_template: revision.tmpl\n  notice_template: notice.tmpl\n", 1)
		fsys["p/pack.yaml"] = &fstest.MapFile{Data: []byte(y)}
		if tmpl != "" {
			fsys["p/notice.tmpl"] = &fstest.MapFile{Data: []byte(tmpl)}
		}
		return fsys
	}
	p, err := LoadPack(withNotice("{{range .Groups}}{{.Heading}}:{{range .Claims}} {{.Claim}}: {{range .Findings}}{{.Message}}{{end}}{{end}}{{range .Findings}} {{.Message}}{{end}}\n{{end}}"), "p")
	if err != nil {
		t.Fatalf("a pack with a notice template does not load: %v", err)
	}
	var data NoticeData
	data.AddClaim(NoticeClaim{Claim: "A", Findings: []NoticeFinding{{Message: "not so", Heading: NoticeCitation}}})
	got, err := p.RenderNotice(data)
	if err != nil || got != "citation: A: not so" {
		t.Fatalf("RenderNotice = %q, %v", got, err)
	}
	if p, err := LoadPack(minimalPack(), "p"); err != nil || p.Revision.NoticeTmpl != nil {
		t.Fatalf("a pack without notice_template has a notice template: %v", err)
	}
	tests := []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"missing file", withNotice(""), `p/pack.yaml: revision.notice_template: reading "notice.tmpl"`},
		{"syntax", withNotice("{{range .Groups}"), "p/notice.tmpl: template:"},
		{"unknown field", withNotice("{{.Claims}}"), "p/notice.tmpl: template:"},
		{"the fields before the headings", withNotice("{{range .Contradicted}}{{.Claim}}{{end}}"), "p/notice.tmpl: template:"},
		{"renders nothing for surviving problems", withNotice("{{/* nothing */}}  \n"), "p/notice.tmpl: the notice renders empty"},
		{"renders nothing for a heading", withNotice("{{with .Contradiction}}{{range .Claims}}{{.Claim}}{{end}}{{range .Findings}}{{.Message}}{{end}}{{end}}{{with .Unverified}}{{range .Findings}}{{.Message}}{{end}}{{end}}"),
			"p/notice.tmpl: the notice renders empty for a claim under the citation heading"},
		{"confirm text syntax", func() fstest.MapFS {
			fsys := minimalPack()
			fsys["p/messages.yaml"] = &fstest.MapFile{Data: []byte("x.y:\n  message: m\n  confirm: '{{.Args.unit'\n")}
			return fsys
		}(), "p/messages.yaml: x.y.confirm: template:"},
		{"an unknown notice heading", func() fstest.MapFS {
			fsys := minimalPack()
			fsys["p/messages.yaml"] = &fstest.MapFile{Data: []byte("x.y:\n  message: m\n  notice: citations\n")}
			return fsys
		}(), `p/messages.yaml: x.y.notice: unknown heading "citations" (want contradiction, citation, weak, unverified)`},
		{"a heading alone is fine, a recommendation without a message is not", func() fstest.MapFS {
			fsys := minimalPack()
			fsys["p/messages.yaml"] = &fstest.MapFile{Data: []byte("x.y:\n  notice: weak\nx.z:\n  notice: weak\n  recommendation: r\n")}
			return fsys
		}(), "p/messages.yaml: x.z.message: empty message"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadPack(tc.fsys, "p")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "x.y.message") {
				t.Errorf("an entry declaring only its heading is refused: %v", err)
			}
		})
	}
}

func TestNoticeHeadingOfACode(t *testing.T) {
	t.Parallel()
	fsys := minimalPack()
	fsys["p/messages.yaml"] = &fstest.MapFile{Data: []byte("a.cite:\n  message: m\n  notice: citation\nb.plain:\n  message: m\nc.only:\n  notice: weak\n")}
	p, err := LoadPack(fsys, "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ code, severity, want string }{
		{"a.cite", "Contradiction", NoticeCitation}, // declared: the severity does not decide
		{"c.only", "Warning", NoticeWeak},
		{"b.plain", "Contradiction", NoticeContradiction}, // no declaration: by severity
		{"b.plain", "WeakEvidence", NoticeWeak},
		{"b.plain", "Warning", NoticeUnverified},
		{"b.plain", "Fatal", NoticeUnverified},
		{"unknown.code", "Contradiction", NoticeContradiction},
	} {
		if got := p.NoticeHeading(tc.code, tc.severity); got != tc.want {
			t.Errorf("NoticeHeading(%s, %s) = %q, want %q", tc.code, tc.severity, got, tc.want)
		}
	}
	if _, ok, _ := p.FormatIssue("c.only", MessageData{}); ok {
		t.Error("a code declaring only its heading has a message")
	}
}

func TestNoticeDataGroupsClaimsUnderTheirMostSeriousHeading(t *testing.T) {
	t.Parallel()
	var d NoticeData
	d.AddFinding(NoticeFinding{Message: "outside", Heading: NoticeUnverified})
	d.AddClaim(NoticeClaim{Claim: "weak and cited", Findings: []NoticeFinding{{Message: "weak", Heading: NoticeWeak}, {Message: "cite", Heading: NoticeCitation}}})
	d.AddClaim(NoticeClaim{Claim: "false and cited", Findings: []NoticeFinding{{Message: "cite", Heading: NoticeCitation}, {Message: "false", Heading: NoticeContradiction}}})
	d.AddClaim(NoticeClaim{Claim: "nothing"})
	d.AddFinding(NoticeFinding{Message: "odd", Heading: "no such heading"})
	var headings []string
	for _, g := range d.Groups {
		headings = append(headings, g.Heading)
	}
	if strings.Join(headings, ",") != "contradiction,citation,unverified" {
		t.Fatalf("groups %v, want contradiction, citation, unverified in that order", headings)
	}
	if d.Contradiction == nil || len(d.Contradiction.Claims) != 1 || d.Contradiction.Claims[0].Claim != "false and cited" ||
		d.Contradiction.Claims[0].Findings[0].Message != "false" || d.Contradiction.Claims[0].Heading != NoticeContradiction {
		t.Errorf("contradiction group %+v", d.Contradiction)
	}
	if d.Citation == nil || len(d.Citation.Claims) != 1 || d.Citation.Claims[0].Findings[0].Message != "cite" || d.Weak != nil {
		t.Errorf("citation group %+v, weak %+v: a claim stands once, under its most serious heading", d.Citation, d.Weak)
	}
	if d.Unverified == nil || len(d.Unverified.Findings) != 2 {
		t.Errorf("unverified group %+v, want both findings outside the claims (an unknown heading is unverified)", d.Unverified)
	}
}

func TestBuiltinNoticesNameWhatSurvived(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var data NoticeData
	data.AddClaim(NoticeClaim{Path: "unitClaims[0]", Kind: "unit", Unit: "733", Player: "PlayerA", Claim: "AlliedBomberAircraft", Level: "highly likely",
		Findings: []NoticeFinding{{Code: "timeline.before_production", Severity: "Contradiction", Heading: NoticeContradiction, Message: "UnitId 733 在 6:02.00 就已出现，早于 PlayerA 第一次生产 AlliedBomberAircraft 的时间 9:10.00。"}}})
	data.AddClaim(NoticeClaim{Path: "unitClaims[1]", Kind: "unit", Unit: "310", Player: "PlayerA", Claim: "AlliedBarracks", Level: "confirmed", LevelName: "确认", NewLevel: "uncertain", NewLevelName: "不确定",
		Findings: []NoticeFinding{{Code: "evidence.not_in_replay", Severity: "Contradiction", Heading: NoticeCitation, Message: "证据“produce|0:41.50|X|310”在回放中找不到对应的操作。"}}})
	data.AddClaim(NoticeClaim{Path: "unitClaims[2]", Kind: "unit", Unit: "587", Claim: "AlliedMCV", Level: "confirmed", LevelName: "确认", NewLevel: "possible", NewLevelName: "可能",
		Alternatives: []string{"AlliedMiner"}, Findings: []NoticeFinding{{Code: "evidence.ambiguous", Severity: "WeakEvidence", Heading: NoticeWeak, Message: "证据不足。"}}})
	data.AddFinding(NoticeFinding{Code: "semantic.failed", Severity: "Warning", Heading: NoticeUnverified, Message: "The combat check could not run."})
	for _, tc := range []struct {
		pack string
		want []string
	}{
		{"ra3", []string{"⚠ 以下判断与录像不符，未能修正：\n- “PlayerA 的 UnitId 733 是 AlliedBomberAircraft”：UnitId 733 在 6:02.00", "9:10.00",
			"⚠ 以下判断引用的证据在录像中找不到（判断本身未必有误）：\n- “PlayerA 的 UnitId 310 是 AlliedBarracks”（确认 → 不确定）：证据“produce|0:41.50|X|310”",
			"⚠ 以下判断证据不足，不能当作定论：\n- “UnitId 587 是 AlliedMCV”（确认 → 可能；也可能是 AlliedMiner）：证据不足。", "⚠ 未能核实：\n- The combat check could not run."}},
		{"dnd", []string{"Not consistent with the transcript:\n- AlliedBomberAircraft: UnitId 733", "Cited evidence not found in the transcript (the statement itself may be right):\n- AlliedBarracks:",
			"Not well supported:\n- AlliedMCV: 证据不足。", "Not verified:\n- The combat check could not run."}},
	} {
		got, err := reg.Pack(tc.pack).RenderNotice(data)
		if err != nil {
			t.Fatalf("%s: %v", tc.pack, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s notice lacks %q:\n%s", tc.pack, w, got)
			}
		}
		if strings.Contains(got, "\n\n\n") || !strings.Contains(got, "\n\n") {
			t.Errorf("%s: the sections are not separated by one blank line:\n%s", tc.pack, got)
		}
		if got, err := reg.Pack(tc.pack).RenderNotice(NoticeData{}); err != nil || got != "" {
			t.Errorf("%s: with nothing surviving the notice is %q (%v), want empty", tc.pack, got, err)
		}
	}
}

// TestBuiltinPacksDeclareTheHeadingOfEveryCode: a built-in pack's messages say,
// for every code they have a text for, which heading the notice lists it under.
func TestBuiltinPacksDeclareTheHeadingOfEveryCode(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ra3", "dnd"} {
		p := reg.Pack(name)
		for code, m := range p.Messages {
			if !IsNoticeHeading(m.Notice) {
				t.Errorf("%s: %s declares no notice heading", name, code)
			}
		}
	}
	ra3 := reg.Pack("ra3")
	for code, want := range map[string]string{
		"evidence.not_in_replay": NoticeCitation, "evidence.out_of_range": NoticeCitation, "power.not_used": NoticeCitation,
		"player.mismatch": NoticeContradiction, "timeline.before_production": NoticeContradiction, "asset.power_mismatch": NoticeContradiction,
		"claim.no_evidence": NoticeWeak, "evidence.ambiguous": NoticeWeak, "builder.not_observed": NoticeWeak,
	} {
		if got := ra3.Messages[code].Notice; got != want {
			t.Errorf("ra3: %s is under %q, want %q", code, got, want)
		}
	}
}
