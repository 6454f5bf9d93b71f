package facts

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/factgate/factgate/knowledge"
)

// reference returns a copy of x that matches every line with the regexp (and its
// prefilter), as the extractor did before line programs: the reference the
// differential tests compare with.
func reference(x *Extractor) *Extractor {
	ref := *x
	ref.lead = nil
	ref.ops = slices.Clone(x.ops)
	for i := range ref.ops {
		ref.ops[i].prog = nil
	}
	if x.duration != nil {
		d := *x.duration
		d.prog = nil
		ref.duration = &d
	}
	return &ref
}

// sameIndex reports how a and b differ ("" = not at all): operations, counts and
// the encoding.
func sameIndex(a, b *Index) string {
	switch {
	case !slices.EqualFunc(a.Ops(), b.Ops(), opsEqual):
		return "operations differ"
	case a.Lines() != b.Lines() || a.Unparsed() != b.Unparsed() || a.Truncated() != b.Truncated():
		return "line, unparsed or truncated counts differ"
	}
	ad, aok := a.StatedDuration()
	bd, bok := b.StatedDuration()
	if ad != bd || aok != bok {
		return "stated durations differ"
	}
	ea, _ := a.MarshalBinary()
	eb, _ := b.MarshalBinary()
	if !bytes.Equal(ea, eb) {
		return "encodings differ"
	}
	return ""
}

// fixtureTexts returns every operation log in the repository's fixtures and the
// shared fixtures (when present), by name.
func fixtureTexts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range []string{filepath.Join("testdata", "replays"), "/work/shared/fixtures/ra3/replays"} {
		names, _ := filepath.Glob(filepath.Join(dir, "*.txt"))
		for _, n := range names {
			data, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			out[n] = string(data)
		}
	}
	if len(out) == 0 {
		t.Fatal("no fixture replays found")
	}
	return out
}

// mutate returns lines of text with random small edits — bytes replaced,
// inserted, deleted, from an alphabet of the characters the rules care about and
// invalid UTF-8 — so that the differential tests reach the lines that almost match.
func mutate(rng *rand.Rand, text string, n int) string {
	alphabet := []string{" ", "\t", ":", ".", "(", ")", ",", "@", "[", "]", "0", "7", "-", "a", "Z", "\xff", "\xe5", "建", "UnitId", "[UnitId]12", "1:02.03 ", "\u3000"}
	lines := strings.Split(text, "\n")
	var b strings.Builder
	for range n {
		l := lines[rng.IntN(len(lines))]
		for range 1 + rng.IntN(3) {
			i := 0
			if len(l) > 0 {
				i = rng.IntN(len(l) + 1)
			}
			switch rng.IntN(3) {
			case 0:
				l = l[:i] + alphabet[rng.IntN(len(alphabet))] + l[i:]
			case 1:
				if i < len(l) {
					l = l[:i] + l[i+1:]
				}
			default:
				if i < len(l) {
					l = l[:i] + alphabet[rng.IntN(len(alphabet))] + l[i+1:]
				}
			}
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestLineProgramsMatchTheRegexp is the differential test of extraction: with the
// test rules and with every built-in pack's fact rules, every fixture log (the
// repository's and the shared fixtures), and mutated copies of their lines, give
// the same index — operations, counts, encoding — with line programs as with the
// regexp alone.
func TestLineProgramsMatchTheRegexp(t *testing.T) {
	t.Parallel()
	extractors := map[string]*Extractor{"test rules": ra3(t)}
	reg, err := knowledge.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range reg.Packs() {
		if p.Facts != nil {
			x, err := NewExtractor(p.Facts)
			if err != nil {
				t.Fatalf("pack %s: %v", p.Name, err)
			}
			extractors["pack "+p.Name] = x
		}
	}
	texts := fixtureTexts(t)
	rng := rand.New(rand.NewPCG(16, 1))
	var all []string
	for _, text := range texts {
		all = append(all, text)
	}
	slices.Sort(all)
	for i, text := range all {
		texts["mutated "+string(rune('a'+i))] = mutate(rng, text, 3000)
	}
	for xname, x := range extractors {
		for i := range x.ops {
			if x.ops[i].prog == nil {
				t.Errorf("%s: rule %s (%s) runs on the regexp, not a line program", xname, x.ops[i].kind, x.ops[i].re)
			}
		}
		if x.duration != nil && x.duration.prog == nil {
			t.Errorf("%s: the duration rule runs on the regexp, not a line program", xname)
		}
		ref := reference(x)
		for tname, text := range texts {
			if d := sameIndex(must(x.Extract(text)), must(ref.Extract(text))); d != "" {
				t.Errorf("%s, %s: %s", xname, tname, d)
			}
		}
	}
}

// TestLineProgramShapes pins which regular expressions get a line program and
// that a program finds the regexp's submatches on lines around its edges.
func TestLineProgramShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc  string
		re    string
		prog  bool
		lines []string
	}{
		{desc: "rule shape", re: `^(?P<time>\d+:\d{2}(?:\.\d+)?) (?P<player>\S+) 选择 (?P<units>\[UnitId\]\d+(?: \[UnitId\]\d+)*)$`, prog: true,
			lines: []string{"1:02.03 P 选择 [UnitId]1 [UnitId]2", "1:02 P 选择 [UnitId]1", "1:02. P 选择 [UnitId]1", "1:2 P 选择 [UnitId]1", "1:02.03 P 选择 [UnitId]1 ", "1:02.03 \xff\xfe 选择 [UnitId]9"}},
		{desc: "optional group at the end", re: `^a(?P<x>b\d+)?$`, prog: true, lines: []string{"a", "ab1", "ab", "abb1", "ab12x"}},
		{desc: "star", re: `^x(?P<pos>[^()]*)y$`, prog: true, lines: []string{"xy", "x1,2y", "x(y", "xyy"}},
		{desc: "dot runs to the end", re: `^k: (.*)$`, prog: true, lines: []string{"k: ", "k: 中文 ok", "k:"}},
		{desc: "single non-ASCII char", re: `^a.b$`, prog: true, lines: []string{"a中b", "a\xffb", "ab", "a中中b"}},
		{desc: "greedy run that must give back", re: `^(\S+)x$`, prog: true, lines: []string{"abx", "x", "xx", "ab", "a bx"}},
		{desc: "run then optional sharing a byte", re: `^(\d+)(\d)?$`, prog: true, lines: []string{"1", "12", "123", "1a"}},
		{desc: "optional part after white space", re: `^(?P<unit>\d+)(?:\s*\((?P<r>[^)]*)\))?\s*$`, prog: true, lines: []string{"12", "12 ", "12(x)", "12  (x) ", "12 (x", "12 (", "12 ()"}},
		{desc: "repeated group", re: `^(?P<units>(?:\[U\]\d+\s*)+)$`, prog: true, lines: []string{"[U]1", "[U]1 [U]2  ", "[U]1[U]2", "[U]", "[U]1 x"}},
		{desc: "class with some non-ASCII runes", re: `^a\s*[:：]\s*(\d+)$`, prog: true, lines: []string{"a: 1", "a：1", "a；1", "a\xff1", "a : 12"}},
		{desc: "lazy", re: `^(.+?)\s*$`, prog: false},
		{desc: "alternation", re: `^(?:ab|cd)e$`, prog: false},
		{desc: "case folding", re: `^(?i)abc$`, prog: false},
		{desc: "unanchored", re: `abc$`, prog: false},
		{desc: "run of a class splitting non-ASCII runes", re: `^[a-z\x{4e00}-\x{9fff}]+$`, prog: false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			re := regexp.MustCompile(tc.re)
			p := compileLineProg(re.String())
			if (p != nil) != tc.prog {
				t.Fatalf("program %v, want %v", p != nil, tc.prog)
			}
			for _, line := range tc.lines {
				want := re.FindStringSubmatchIndex(line)
				sub := make([]int, 2*p.ncap)
				got := sub
				if matched, decided := p.match(line, sub); !decided {
					t.Fatalf("%q: the program gave up", line)
				} else if !matched {
					got = nil
				}
				if !slices.Equal(got, want) {
					t.Errorf("%q: program %v, regexp %v", line, got, want)
				}
			}
		})
	}
}

// FuzzLineProgram checks, for every rule of the test rules, that a line program
// and the regexp agree on arbitrary lines.
func FuzzLineProgram(f *testing.F) {
	for _, text := range []string{
		"1:02.03 PlayerA 选择 [UnitId]1 [UnitId]2",
		"0:09.50 PlayerA 放置建筑 AlliedPowerPlant [UnitId]246(建造者) @ (1204.5,880,12)",
		"14:32.40 PlayerB 使用 SpecialPower_PackReplaceSelf [UnitId]246",
		"录像时长: 14:32.40",
	} {
		f.Add(text)
	}
	x := ra3(f)
	var ms []*lineMatcher
	for i := range x.ops {
		ms = append(ms, &x.ops[i].lineMatcher)
	}
	ms = append(ms, x.duration)
	f.Fuzz(func(t *testing.T, line string) {
		var lead leadRun
		if x.lead != nil {
			lead.sub = make([]int, x.lead.slots)
		}
		for _, m := range ms {
			if m.prog == nil {
				continue
			}
			want := m.re.FindStringSubmatchIndex(line)
			got := m.find(line, make([]int, 2*m.prog.ncap))
			if !slices.Equal(got, want) {
				t.Fatalf("%s on %q: program %v, regexp %v", m.re, line, got, want)
			}
			if m.shared {
				// After the lead's one run, as the extraction matches.
				got := slices.Clone(m.findAfter(x.lead, &lead, line, make([]int, 2*m.prog.ncap)))
				if !slices.Equal(got, want) {
					t.Fatalf("%s on %q after the lead: program %v, regexp %v", m.re, line, got, want)
				}
			}
		}
	})
}

// TestLeadSharedByRules pins the lead of the built-in RA3 rules and of the test
// rules: every op rule opens with the time and the player, which the extraction
// then reads once per line; the differential test above compares its results
// with the regexp's. Rules that open differently share no lead.
func TestLeadSharedByRules(t *testing.T) {
	reg, err := knowledge.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	p := reg.Pack("ra3")
	if p == nil || p.Facts == nil {
		t.Fatal("no built-in ra3 fact rules")
	}
	pack, err := NewExtractor(p.Facts)
	if err != nil {
		t.Fatal(err)
	}
	for name, x := range map[string]*Extractor{"pack ra3": pack, "test rules": ra3(t)} {
		if x.lead == nil {
			t.Fatalf("%s: no lead", name)
		}
		// The lead saves the time (group 1) and the player (group 2).
		if x.lead.slots != 6 {
			t.Errorf("%s: the lead saves %d slots, want 6 (time and player)", name, x.lead.slots)
		}
		for i := range x.ops {
			if !x.ops[i].shared {
				t.Errorf("%s: op %s does not share the lead", name, x.ops[i].kind)
			}
		}
	}

	for _, c := range []struct {
		name  string
		exprs []string
		want  bool
	}{
		{"different openings", []string{`^(?P<time>\d+)\s+a$`, `^x(?P<time>\d+)\s+b$`}, false},
		{"one rule", []string{`^(?P<time>\d+)\s+a$`}, false},
		{"shared time", []string{`^(?P<time>\d+)\s+a$`, `^(?P<time>\d+)\s+b$`}, true},
		// A run that may give bytes back keeps a way back: it ends the lead.
		{"no way back only", []string{`^\S+\S a$`, `^\S+\S b$`}, false},
	} {
		var progs []*lineProg
		for _, e := range c.exprs {
			p := compileLineProg(e)
			if p == nil {
				t.Fatalf("%s: %s has no line program", c.name, e)
			}
			progs = append(progs, p)
		}
		if got := findLead(progs) != nil; got != c.want {
			t.Errorf("%s: lead found %v, want %v", c.name, got, c.want)
		}
	}
}
