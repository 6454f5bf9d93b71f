package facts

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/factgate/factgate/knowledge"
)

const timeGroup = `(?P<time>\d+:\d{2}(?:\.\d+)?)`

func TestNewExtractorRejects(t *testing.T) {
	t.Parallel()
	sell := knowledge.OpRule{Op: "sell", Regex: `^` + timeGroup + ` (?P<player>\S+) 出售 \[UnitId\](?P<unit>\d+)$`}
	tests := []struct {
		name  string
		edit  func(r *knowledge.FactRules)
		rules *knowledge.FactRules // instead of edit
		want  string
	}{
		{name: "nil rules", rules: nil, want: "no fact rules"},
		{name: "no ops", rules: &knowledge.FactRules{}, want: "no ops"},
		{name: "op without name", edit: func(r *knowledge.FactRules) { r.Ops[2].Op = "" }, want: "ops[2]: no op name"},
		{name: "op without regex", edit: func(r *knowledge.FactRules) { r.Ops[1].Regex = "" }, want: `ops[1] (op "place"): no regex`},
		{name: "bad regex", edit: func(r *knowledge.FactRules) { r.Ops[3].Regex = `(?P<time>[` }, want: `ops[3] (op "sell"): regex: error parsing regexp`},
		{name: "no time group", edit: func(r *knowledge.FactRules) { r.Ops[3].Regex = `出售 \[UnitId\](?P<unit>\d+)` }, want: `ops[3] (op "sell"): regex has no "time" group`},
		{name: "unknown group", edit: func(r *knowledge.FactRules) { r.Ops[3].Regex = timeGroup + ` (?P<who>\S+) 出售` }, want: `ops[3] (op "sell"): unknown named group "who"`},
		{name: "units without units regex", edit: func(r *knowledge.FactRules) { r.Ops[4].Units = "" }, want: `ops[4] (op "select"): regex has a "units" group but the rule has no units regex`},
		{name: "units regex without units group", edit: func(r *knowledge.FactRules) { r.Ops[3].Units = `(\d+)` }, want: `ops[3] (op "sell"): units regex "(\\d+)" given but the regex has no "units" group`},
		{name: "units regex without a group", edit: func(r *knowledge.FactRules) { r.Ops[4].Units = `\d+` }, want: `ops[4] (op "select"): units regex "\\d+" has no group`},
		{name: "bad units regex", edit: func(r *knowledge.FactRules) { r.Ops[4].Units = `(` }, want: `ops[4] (op "select"): units regex: error parsing regexp`},
		{name: "duration without time", edit: func(r *knowledge.FactRules) { r.Duration = `^录像时长: (?P<value>.*)$` }, want: `duration: regex "^录像时长: (?P<value>.*)$" has no "time" group`},
		{name: "bad duration", edit: func(r *knowledge.FactRules) { r.Duration = `(` }, want: `duration: regex: error parsing regexp`},
		{name: "unknown role", edit: func(r *knowledge.FactRules) { r.Roles["pilot"] = []string{"move"} }, want: `roles: unknown role "pilot"`},
		{name: "role names unknown op", edit: func(r *knowledge.FactRules) { r.Roles["builder"] = []string{"build", "construct"} }, want: `roles.builder: no op rule makes "construct" operations`},
		{name: "role op names no unit", edit: func(r *knowledge.FactRules) { r.Roles["select"] = []string{"move"} }, want: `roles.select: op "move" names no unit`},
		{name: "power role without power", edit: func(r *knowledge.FactRules) { r.Roles["power"] = []string{"sell"} }, want: `roles.power: op "sell" names no power`},
		{name: "producer role without asset", edit: func(r *knowledge.FactRules) { r.Roles["producer"] = []string{"sell"} }, want: `roles.producer: op "sell" names no asset`},
		{name: "evidence for unknown op", edit: func(r *knowledge.FactRules) { r.Evidence["attack"] = []string{"unit"} }, want: `evidence.attack: no op rule makes "attack" operations`},
		{name: "evidence field no rule fills", edit: func(r *knowledge.FactRules) { r.Evidence["sell"] = []string{"unit", "asset"} }, want: `evidence.sell[1]: field "asset" is filled by no "sell" rule`},
		{name: "evidence unknown field", edit: func(r *knowledge.FactRules) { r.Evidence["sell"] = []string{"target"} }, want: `evidence.sell[0]: unknown field "target"`},
		{name: "evidence time field", edit: func(r *knowledge.FactRules) { r.Evidence["sell"] = []string{"time"} }, want: `evidence.sell[0]: unknown field "time"`},
		{name: "op names differing in case", edit: func(r *knowledge.FactRules) { s := sell; s.Op = "Sell"; r.Ops = append(r.Ops, s) }, want: `ops[7] (op "Sell"): op name differs from op "sell" only in case`},
		{name: "negative max lines", edit: func(r *knowledge.FactRules) { r.MaxLines = -1 }, want: "max_lines -1 is negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.rules
			if tc.edit != nil {
				r = loadRules(t)
				tc.edit(r)
			}
			x, err := NewExtractor(r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewExtractor = %v, %v; want an error containing %q", x, err, tc.want)
			}
		})
	}
}

func TestNewExtractorAccepts(t *testing.T) {
	t.Parallel()
	sellRe := `^` + timeGroup + ` (?P<player>\S+) 出售 \[UnitId\](?P<unit>\d+)$`
	tests := []struct {
		name  string
		rules *knowledge.FactRules
		check func(t *testing.T, ix *Index)
	}{
		{
			name: "precompiled regexes are used as given",
			rules: &knowledge.FactRules{
				Ops:        []knowledge.OpRule{{Op: "sell", Re: regexp.MustCompile(sellRe)}},
				DurationRe: regexp.MustCompile(`^录像时长:\s*(?P<time>\S+)$`),
			},
			check: func(t *testing.T, ix *Index) {
				if ix.Count("sell") != 1 || ix.End() != clock(t, "9:00") {
					t.Errorf("Count, End = %d, %v", ix.Count("sell"), ix.End())
				}
			},
		},
		{
			name:  "undeclared roles default to the op of the same name",
			rules: &knowledge.FactRules{Ops: []knowledge.OpRule{{Op: "sell", Regex: sellRe}}},
			check: func(t *testing.T, ix *Index) {
				if !ix.ActedAs(5, RoleSell) || !ix.HasRole("sell", RoleSell) {
					t.Error("sell does not play the sell role")
				}
			},
		},
		{
			name: "an undeclared role does not default to an op that cannot play it",
			rules: &knowledge.FactRules{Ops: []knowledge.OpRule{
				{Op: "sell", Regex: sellRe},
				{Op: "power", Regex: `^` + timeGroup + ` (?P<player>\S+) casts (?P<power>\S+)$`},
			}},
			check: func(t *testing.T, ix *Index) {
				if ix.HasRole("power", RolePower) || !ix.HasRole("sell", RoleSell) {
					t.Error("a power op without units plays the power role")
				}
			},
		},
		{
			name: "a rule without prefilter literal still matches",
			rules: &knowledge.FactRules{Ops: []knowledge.OpRule{
				{Op: "sell", Regex: `(?i)^` + timeGroup + ` (?P<player>\S+) SELLS? #(?P<unit>\d+)$`},
			}},
			check: func(t *testing.T, ix *Index) {
				if !ix.Observed(6) || !ix.Observed(7) {
					t.Error("case-insensitive rule did not match")
				}
			},
		},
		{
			name: "a units regex that is not literal-then-digits goes through the regexp",
			rules: &knowledge.FactRules{Ops: []knowledge.OpRule{
				{Op: "select", Regex: `^` + timeGroup + ` (?P<player>\S+) picks (?P<units>.*)$`, Units: `(?:#|id=)(\d+)`},
			}},
			check: func(t *testing.T, ix *Index) {
				if !ix.Observed(8) || !ix.Observed(9) || ix.Observed(10) {
					t.Errorf("units = %v", ix.Units())
				}
			},
		},
	}
	const text = "录像时长: 9:00\n0:01.00 A 出售 [UnitId]5\n0:02.00 B sell #6\n0:03.00 B SELLS #7\n0:04.00 C picks #8 id=9 x10\n"
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x, err := NewExtractor(tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			ix, err := x.Extract(text)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, ix)
		})
	}
}

func TestRequiredLiterals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		re      string
		matches string
		want    []string
	}{
		{"longest runs first, at most three", `^` + timeGroup + ` (?P<player>\S+) 开始建造建筑 (?P<asset>\S+) \[UnitId\](?P<unit>\d+)\(建造者\)$`, "0:05.20 A 开始建造建筑 X [UnitId]246(建造者)", []string{" 开始建造建筑 ", "(建造者)", " [UnitId]"}},
		{"a rare literal beside a common one", `^` + timeGroup + `\s+(?P<player>\S+)\s+出售\s+\[UnitId\](?P<unit>\d+)\s*$`, "3:10.00 B 出售 [UnitId]512", []string{"[UnitId]", "出售"}},
		{"literal across a capture", `a(bcd)e\d`, "abcde1", []string{"abcde"}},
		{"inside a plus", `x(?:hello\d)+`, "xhello1hello2", []string{"hello"}},
		{"inside a repeat of at least one", `(?:world){2,3}\d`, "worldworld1", []string{"worldworld"}},
		{"not inside an optional part", `\d(?:optional)?x`, "1x", []string{"x"}},
		{"not inside a star", `\d(?:never)*\d`, "12", nil},
		{"not from an alternation", `(?:alpha|beta)\d`, "beta1", nil},
		{"not case-folded", `(?i)hello`, "HELLO", nil},
		{"a literal inside another is dropped", `ab\dab\dabc`, "ab1ab2abc", []string{"abc"}},
		{"invalid regex", `(`, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := requiredLiterals(tc.re)
			if !slices.Equal(got, tc.want) {
				t.Errorf("requiredLiterals(%q) = %q, want %q", tc.re, got, tc.want)
			}
			if tc.matches != "" && !regexp.MustCompile(tc.re).MatchString(tc.matches) {
				t.Fatalf("table error: %q does not match %q", tc.matches, tc.re)
			}
			for _, lit := range got {
				if !strings.Contains(tc.matches, lit) {
					t.Errorf("a match %q does not contain the literal %q", tc.matches, lit)
				}
			}
		})
	}
}

func TestLiteralThenDigits(t *testing.T) {
	t.Parallel()
	tests := []struct{ re, want string }{
		{`\[UnitId\](\d+)`, "[UnitId]"},
		{`#([0-9]+)`, "#"},
		{`#(\d*)`, ""},
		{`#(\d+)x`, ""},
		{`(?i)id(\d+)`, ""},
		{`#(?:\d+)`, ""},
		{`#(\w+)`, ""},
		{`(\d+)`, ""},
	}
	for _, tc := range tests {
		if got := literalThenDigits(tc.re); got != tc.want {
			t.Errorf("literalThenDigits(%q) = %q, want %q", tc.re, got, tc.want)
		}
	}
}

// TestSplitUnitsLikeRegexp compares the literal-then-digits scan with the regexp's
// FindAll on inputs with near-misses and overlapping literals.
func TestSplitUnitsLikeRegexp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ re, in string }{
		{`\[UnitId\](\d+)`, "[UnitId]1 [UnitId]22 [UnitId] [UnitId]x [UnitId]333"},
		{`aa(\d+)`, "aaa1 aa aaaa22"},
		{`#(\d+)`, "##1#2 #"},
		{`\[UnitId\](\d+)`, "[UnitId]99999999999999999999"},
	} {
		fast := opMatcher{unitsRe: regexp.MustCompile(tc.re), unitsPrefix: literalThenDigits(tc.re)}
		slow := opMatcher{unitsRe: fast.unitsRe}
		if fast.unitsPrefix == "" {
			t.Fatalf("%q takes no fast path", tc.re)
		}
		a, aok := fast.splitUnits(nil, tc.in)
		b, bok := slow.splitUnits(nil, tc.in)
		if aok != bok || (aok && !equalAny(a, b)) {
			t.Errorf("%q on %q: fast %v %v, regexp %v %v", tc.re, tc.in, a, aok, b, bok)
		}
	}
}
