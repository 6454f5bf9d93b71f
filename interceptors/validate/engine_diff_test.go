package validate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/knowledge"
)

// The differential test of the rule engine: the ra3 pack's rules.yaml, run by the
// engine, gives exactly the issues of the Go rules it replaced
// (rules_ref_test.go) — every code, severity, path, argument, recommendation,
// message and related fact, in the same order — on every fixture answer and on
// thousands of random answers against every test replay.

// withReference returns a copy of c that runs the reference Go rules.
func withReference(c *Checker) *Checker {
	r := *c
	r.reference = referenceRules
	return &r
}

// diffInput builds what Offline.Check gives the checker for segments.
func diffInput(tb testing.TB, off *Offline, segments []string) (*Checker, Input) {
	tb.Helper()
	op, err := off.choosePack(CheckRequest{})
	if err != nil {
		tb.Fatal(err)
	}
	var ctx knowledge.Extracted
	if len(segments) > 0 {
		ctx = knowledge.ExtractContextTexts(op.pack, segments[:1])
	}
	set, err := off.chooseSet(op, "", ctx.KnowledgeSet)
	if err != nil {
		tb.Fatal(err)
	}
	var idx []*facts.Index
	for _, text := range segments {
		ix, err := op.extractor.Extract(text)
		if err != nil {
			tb.Fatal(err)
		}
		idx = append(idx, ix)
	}
	var ix *facts.Index
	if len(idx) > 0 {
		ix = facts.Merge(idx...)
	}
	scopes, players := resolveScopes(op.checker.dim, ctx, nil, ix)
	return op.checker, Input{Index: ix, Set: set.set, Players: players, Scopes: scopes}
}

// sameIssues fails when the engine's issues differ from the reference's.
func sameIssues(tb testing.TB, what, answer string, got, want []interceptors.Issue) {
	tb.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	render := func(is []interceptors.Issue) string {
		var b strings.Builder
		for _, i := range is {
			j, _ := json.Marshal(i)
			b.WriteString("\n  " + string(j))
		}
		return b.String()
	}
	tb.Fatalf("%s: the engine's issues differ from the reference rules'\nanswer: %s\nengine:%s\nreference:%s", what, answer, render(got), render(want))
}

// fixtureDirs are the fixture cases: the package's copy and the shared fixtures.
func fixtureCaseFiles(tb testing.TB) []string {
	var files []string
	for _, dir := range []string{filepath.Join("testdata", "cases"), "/work/shared/fixtures/ra3/cases"} {
		f, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		files = append(files, f...)
	}
	if len(files) == 0 {
		tb.Fatal("no fixture cases")
	}
	return files
}

func TestEngineMatchesReferenceOnFixtures(t *testing.T) {
	off := newOffline(t, Config{})
	for _, f := range fixtureCaseFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c fixtureCase
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		segs := c.segments(t)
		checker, in := diffInput(t, off, segs)
		ref := withReference(checker)
		for _, withFacts := range []bool{true, false} {
			in := in
			if !withFacts {
				in = Input{Set: in.Set, Players: in.Players, Scopes: in.Scopes}
			}
			got, want := checker.Check(c.Answer, in), ref.Check(c.Answer, in)
			sameIssues(t, fmt.Sprintf("%s (facts %v)", f, withFacts), c.Answer, got, want)
		}
	}
}

func TestEngineMatchesReferenceOnRandomAnswers(t *testing.T) {
	off := newOffline(t, Config{})
	n := 600
	if testing.Short() {
		n = 100
	}
	replays, _ := filepath.Glob(filepath.Join("testdata", "replays", "*.txt"))
	total := 0
	codes := map[string]int{}
	for ri, file := range replays {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		checker, in := diffInput(t, off, []string{string(data)})
		ref := withReference(checker)
		g := newAnswerGen(checker.pack, in, uint64(ri))
		for i := range n {
			a := g.answer()
			in := in
			switch i % 10 {
			case 8:
				in.Index = nil // no facts
			case 9:
				in.Set = nil // no knowledge
			}
			got, want := checker.Check(a, in), ref.Check(a, in)
			sameIssues(t, fmt.Sprintf("%s answer %d", filepath.Base(file), i), a, got, want)
			total++
			for _, is := range got {
				codes[is.Code]++
			}
		}
	}
	t.Logf("%d random answers, the same issues: %v", total, codes)
	// Every rule of the pack fired somewhere: the answers reach all of them.
	for _, r := range checker0(t, off).pack.RuleSet.Rules {
		if codes[r.Code] == 0 {
			t.Errorf("no random answer gave %s", r.Code)
		}
	}
}

func checker0(tb testing.TB, off *Offline) *Checker {
	op, err := off.choosePack(CheckRequest{})
	if err != nil {
		tb.Fatal(err)
	}
	return op.checker
}

// answerGen writes random ra3 answers whose claims cite the facts truly, nearly
// and falsely, about units, players and assets the facts and the knowledge know
// and do not know.
type answerGen struct {
	rnd     *rand.Rand
	pack    *knowledge.Pack
	ops     []facts.Op
	units   []int64
	players []string
	assets  []string
	powers  []string
}

func newAnswerGen(pack *knowledge.Pack, in Input, seed uint64) *answerGen {
	g := &answerGen{rnd: rand.New(rand.NewPCG(seed, 30)), pack: pack}
	g.ops = in.Index.Ops()
	g.units = in.Index.Units()
	g.players = append(in.Index.Players(), "Ghost", "")
	seen := map[string]bool{}
	addAsset := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			g.assets = append(g.assets, a)
		}
	}
	powers := map[string]bool{}
	for _, op := range g.ops {
		addAsset(op.Asset)
		if op.Power != "" && !powers[op.Power] {
			powers[op.Power] = true
			g.powers = append(g.powers, op.Power)
		}
	}
	if in.Set != nil {
		for _, e := range in.Set.WithTag("builder") {
			addAsset(e.Entry.ID)
		}
		for _, p := range g.powers {
			for _, e := range in.Set.WithTag(knowledge.SpecialPowerTag(p)) {
				addAsset(e.Entry.ID)
			}
		}
	}
	addAsset("AlliedMCV")
	addAsset("NoSuchAsset")
	g.powers = append(g.powers, "SpecialPower_Nothing")
	return g
}

func (g *answerGen) pick(n int) int { return g.rnd.IntN(n) }

func (g *answerGen) level() string {
	levels := []string{"confirmed", "highly likely", "possible", "uncertain", "ruled out", "确认", "很可能", "可能", "maybe", ""}
	return levels[g.pick(len(levels))]
}

// item writes one evidence item: a true citation, or one off in time, unit,
// power or type, or one out of the replay, or an unstructured one.
func (g *answerGen) item(unit int64) string {
	if len(g.ops) == 0 {
		return "power|1:00|SpecialPower_X|1"
	}
	op := g.ops[g.pick(len(g.ops))]
	if g.pick(3) == 0 {
		// an operation of the claimed unit, when it has one
		for range 20 {
			o := g.ops[g.pick(len(g.ops))]
			if slices.Contains(o.Units, unit) {
				op = o
				break
			}
		}
	}
	u := unit
	if len(op.Units) > 0 && g.pick(2) == 0 {
		u = op.Units[0]
	}
	s := evidenceOf(g.pack, &op, u)
	switch g.pick(12) {
	case 0:
		s = strings.Replace(s, "|", "|1", 1) // far in time
	case 1:
		s = strings.Replace(s, "|", "|999", 1) // after the end
	case 2:
		if op.Power != "" {
			s = strings.Replace(s, op.Power, g.powers[g.pick(len(g.powers))], 1)
		}
	case 3:
		s = strings.Replace(s, strconv.FormatInt(u, 10), strconv.FormatInt(g.units[g.pick(len(g.units))], 10), 1)
	case 4:
		s = "the unit did something at 1:00"
	case 5:
		s = "teleport|1:00|x"
	case 6:
		at := op.At + 300_000_000 // 0.3 s off: within or just beyond the tolerance
		s = strings.Replace(s, interceptors.FormatClock(op.At), interceptors.FormatClock(at), 1)
	}
	return s
}

func (g *answerGen) strs(items []string) string {
	b, _ := json.Marshal(items)
	return string(b)
}

func (g *answerGen) unitClaim() string {
	var unit int64 = 424242
	if len(g.units) > 0 && g.pick(5) > 0 {
		unit = g.units[g.pick(len(g.units))]
	}
	var fields []string
	switch g.pick(10) {
	case 0: // absent
	case 1:
		fields = append(fields, `"unitId":"abc"`)
	case 2:
		fields = append(fields, `"unitId":"`+strconv.FormatInt(unit, 10)+`"`)
	default:
		fields = append(fields, `"unitId":`+strconv.FormatInt(unit, 10))
	}
	player := g.players[g.pick(len(g.players))]
	if g.pick(6) > 0 {
		pj, _ := json.Marshal(player)
		fields = append(fields, `"player":`+string(pj))
	}
	claim := ""
	if g.pick(8) > 0 {
		claim = g.assets[g.pick(len(g.assets))]
	}
	cj, _ := json.Marshal(claim)
	fields = append(fields, `"claim":`+string(cj))
	if lv := g.level(); lv != "" || g.pick(2) == 0 {
		lj, _ := json.Marshal(lv)
		fields = append(fields, `"evidenceLevel":`+string(lj))
	}
	var ev []string
	for range g.pick(4) {
		ev = append(ev, g.item(unit))
	}
	fields = append(fields, `"evidence":`+g.strs(ev))
	if g.pick(2) == 0 {
		fields = append(fields, `"alternatives":`+g.strs([]string{g.assets[g.pick(len(g.assets))]}))
	} else {
		fields = append(fields, `"alternatives":[]`)
	}
	if g.pick(3) == 0 {
		fields = append(fields, `"needsConfirmation":["seen building"]`)
	}
	return "{" + strings.Join(fields, ",") + "}"
}

func (g *answerGen) claim(i int) string {
	var ev []string
	for range g.pick(3) {
		ev = append(ev, g.item(0))
	}
	lj, _ := json.Marshal(g.level())
	return `{"claim":"claim ` + strconv.Itoa(i) + `","evidenceLevel":` + string(lj) + `,"evidence":` + g.strs(ev) + `}`
}

func (g *answerGen) answer() string {
	var units, events, timelines []string
	for range g.pick(12) {
		units = append(units, g.unitClaim())
	}
	for i := range g.pick(6) {
		events = append(events, g.claim(i))
	}
	for i := range g.pick(4) {
		timelines = append(timelines, g.claim(i))
	}
	return answer(`{"unitClaims":[` + strings.Join(units, ",") + `],"eventClaims":[` + strings.Join(events, ",") + `],"timelineClaims":[` + strings.Join(timelines, ",") + `]}`)
}

// TestEngineProgramsMatchReference: with every expression run as a cel-go program
// (the path of what the planner does not take), ra3's rules still give the
// reference's issues on every fixture answer and on random ones.
func TestEngineProgramsMatchReference(t *testing.T) {
	packs, err := knowledge.BuiltinPacks() // fresh copies: their expressions are not yet planned
	if err != nil {
		t.Fatal(err)
	}
	var pack *knowledge.Pack
	for _, p := range packs {
		if p.Name == "ra3" {
			pack = p
		}
	}
	off := newOffline(t, Config{})
	checker, in := diffInput(t, off, []string{replayText(t, "allied_vs_soviet.txt")})
	core, err := planCore(pack, false)
	if err != nil {
		t.Fatal(err)
	}
	if core.planned != 0 {
		t.Fatalf("%d expressions planned", core.planned)
	}
	programs := *checker
	programs.rules = &engine{engineCore: core}
	ref := withReference(checker)
	g := newAnswerGen(checker.pack, in, 99)
	answers := []string{}
	for _, f := range fixtureCaseFiles(t) {
		data, _ := os.ReadFile(f)
		var c fixtureCase
		if json.Unmarshal(data, &c) == nil {
			answers = append(answers, c.Answer)
		}
	}
	for range 300 {
		answers = append(answers, g.answer())
	}
	for i, a := range answers {
		sameIssues(t, fmt.Sprintf("answer %d", i), a, programs.Check(a, in), ref.Check(a, in))
	}
}
