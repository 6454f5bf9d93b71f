// Package facts turns the operation log in a request's user messages into a fact
// index: typed operations extracted line by line by a pack's declarative rules
// (knowledge.FactRules), and everything the validators of PRODUCT.md §8 ask about
// them, precomputed — per UnitId, per player, per operation kind, the end of the
// facts, citation matching and "relevant facts" excerpts.
//
// Extraction, the index and its encoding are pure: no I/O, no cache, no request.
// The facts stage of a route's chain (Interceptor, in interceptor.go) calls them:
// it keys the result with SourceKey, keeps it in memory and in the shared cache
// (MarshalBinary), merges a session's segments with Merge, and hands the index to
// later phases through FromExchange. Nothing domain-specific is parsed in Go beyond
// game-clock times (interceptors.ParseClock); what a line means comes from the
// rules, and what an operation means to validators comes from the rules' roles.
package facts

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"

	"github.com/factgate/factgate/knowledge"
)

// The roles an operation kind can play (knowledge.FactRules.Roles). Index lookups
// that the spec defines by meaning ("acted as builder", "used a power") ask by
// role, never by op name.
const (
	// RoleBuilder: the unit built or placed something (the op's asset).
	RoleBuilder = "builder"
	// RoleProducer: the unit produced an asset; FirstProduction reads these.
	RoleProducer = "producer"
	// RolePower: the unit used a special power (the op's power).
	RolePower = "power"
	// RoleSell: the unit was sold.
	RoleSell = "sell"
	// RoleSelect: the player selected the units.
	RoleSelect = "select"
)

// knownRoles lists the roles in bit order of roleSet.
var knownRoles = [...]string{RoleBuilder, RoleProducer, RolePower, RoleSell, RoleSelect}

// roleSet is a bit set over knownRoles.
type roleSet uint8

func roleBit(role string) (roleSet, bool) {
	for i, r := range knownRoles {
		if r == role {
			return 1 << i, true
		}
	}
	return 0, false
}

func (s roleSet) has(role string) bool {
	b, ok := roleBit(role)
	return ok && s&b != 0
}

// The operation fields a rule's named groups fill and evidence parameters name.
const (
	fieldTime   = "time"
	fieldPlayer = "player"
	fieldAsset  = "asset"
	fieldPower  = "power"
	fieldUnit   = "unit"
	fieldUnits  = "units"
	fieldPos    = "pos"
)

var knownGroups = []string{fieldTime, fieldPlayer, fieldAsset, fieldPower, fieldUnit, fieldUnits, fieldPos}

// Default bounds of one extraction.
const (
	// DefaultMaxLines bounds the lines read when FactRules.MaxLines is zero.
	DefaultMaxLines = 1_000_000
	// DefaultMaxBytes bounds the bytes read (after trimming each line) when no
	// WithMaxBytes option is given: 16 MiB, about twenty times the largest
	// analysis log seen in practice.
	DefaultMaxBytes = 16 << 20
	// MaxLineBytes is the longest line (after trimming) that can be an operation;
	// longer lines are read and counted but never match a rule, so one huge line
	// costs no regular-expression time.
	MaxLineBytes = 64 << 10
)

// Extractor turns request text into a fact index with one pack's fact rules. It is
// immutable after NewExtractor and safe for concurrent use.
type Extractor struct {
	version  string
	ops      []opMatcher
	duration *lineMatcher
	schema   *schema
	maxLines int
	maxBytes int
	// maxCaps is the most submatch slots (groups + 1) of a rule's line program.
	maxCaps int
	// records are the record rules (records.go).
	records []recordRule
	// lead is the opening the op rules' line programs share (nil: none); the
	// rules (the duration rule among them) with shared set run it once per line
	// (see lineLead).
	lead *lineLead
}

// shareLead finds the opening the op rules' line programs share and marks the
// rules (and the duration rule) that open with it.
func (x *Extractor) shareLead() {
	var progs []*lineProg
	for i := range x.ops {
		if p := x.ops[i].prog; p != nil {
			progs = append(progs, p)
		}
	}
	if x.lead = findLead(progs); x.lead == nil {
		return
	}
	for i := range x.ops {
		x.ops[i].shared = x.lead.shares(x.ops[i].prog)
	}
	if x.duration != nil {
		x.duration.shared = x.lead.shares(x.duration.prog)
	}
}

// lineMatcher is a compiled rule regex with its cheap prefilter.
type lineMatcher struct {
	re *regexp.Regexp
	// literals are substrings every matching line contains (nil = none known); a
	// line lacking one is skipped without running re.
	literals []string
	gTime    int
	// prog matches without the regexp when the regex has the shape it handles
	// (nil otherwise); the prefilter is then not needed, except for the rare line
	// the program gives up on.
	prog *lineProg
	// shared: prog opens with the extractor's lead.
	shared bool
}

// opMatcher is one compiled OpRule: submatch group numbers (-1 = absent).
type opMatcher struct {
	lineMatcher
	kind    string
	kindID  int
	gPlayer int
	gAsset  int
	gPower  int
	gUnit   int
	gUnits  int
	gPos    int
	unitsRe *regexp.Regexp
	// unitsPrefix is set when unitsRe is exactly a literal followed by a group of
	// ASCII digits (`\[UnitId\](\d+)`): splitUnits then scans for the literal
	// itself instead of running the regexp — the same leftmost-first matches.
	unitsPrefix string
}

// Option adjusts an Extractor's bounds.
type Option func(*Extractor)

// WithMaxBytes bounds the bytes one extraction reads (the sum over lines of the
// trimmed line's length plus one). Lines past the bound are ignored and the index
// reports Truncated. n <= 0 keeps DefaultMaxBytes; n above 1 GiB means 1 GiB.
func WithMaxBytes(n int) Option {
	return func(x *Extractor) {
		if n > 0 {
			x.maxBytes = min(n, 1<<30)
		}
	}
}

// NewExtractor compiles and validates fact rules. Regular expressions whose Re field
// is nil are compiled from their source; compiled ones are used as given (the rules
// are not modified). It reports the first problem it finds, naming the rule
// (ops[i] and its op) and the problem:
//   - an op rule without an op name, a regex, or a "time" group; a named group other
//     than time, player, asset, power, unit, units, pos; a "units" group without a
//     Units regex (with at least one group), or a Units regex without a "units"
//     group;
//   - a Duration regex without a "time" group;
//   - a role other than builder, producer, power, sell, select; a role naming an op
//     no rule makes; a role op that names no unit (and, for "power", no power; for
//     "producer", no asset);
//   - an evidence type no rule makes, or a parameter naming a field that no rule of
//     that op fills;
//   - op names that differ only in case (evidence types are matched in any case);
//   - a negative MaxLines.
//
// A role the rules do not declare defaults to the op of the same name, when one
// exists and names what the role needs (the RA3 ops "power", "sell" and "select"
// need no declaration). nil rules are an error.
func NewExtractor(r *knowledge.FactRules, opts ...Option) (*Extractor, error) {
	if r == nil {
		return nil, errors.New("facts: no fact rules")
	}
	if len(r.Ops) == 0 && len(r.Records) == 0 {
		return nil, errors.New("facts: fact rules have no ops and no records")
	}
	if r.MaxLines < 0 {
		return nil, fmt.Errorf("facts: max_lines %d is negative", r.MaxLines)
	}
	records, err := compileRecords(r.Records)
	if err != nil {
		return nil, err
	}
	x := &Extractor{version: r.Version, maxLines: r.MaxLines, maxBytes: DefaultMaxBytes, records: records}
	if x.maxLines == 0 {
		x.maxLines = DefaultMaxLines
	}
	for _, o := range opts {
		o(x)
	}

	sc := &schema{}
	kindIDs := map[string]int{}
	fills := map[string]map[string]bool{} // op -> fields some rule of it fills
	for i := range r.Ops {
		m, err := compileOp(i, &r.Ops[i])
		if err != nil {
			return nil, err
		}
		id, ok := kindIDs[m.kind]
		if !ok {
			for _, k := range sc.kinds {
				if strings.EqualFold(k.name, m.kind) {
					return nil, fmt.Errorf("facts: ops[%d] (op %q): op name differs from op %q only in case", i, m.kind, k.name)
				}
			}
			id = len(sc.kinds)
			kindIDs[m.kind] = id
			sc.kinds = append(sc.kinds, kindInfo{name: m.kind})
			fills[m.kind] = map[string]bool{}
		}
		m.kindID = id
		for g, n := range map[string]int{fieldPlayer: m.gPlayer, fieldAsset: m.gAsset, fieldPower: m.gPower, fieldUnit: m.gUnit, fieldUnits: m.gUnits, fieldPos: m.gPos} {
			if n >= 0 {
				fills[m.kind][g] = true
			}
		}
		x.ops = append(x.ops, m)
	}

	if r.Duration != "" || r.DurationRe != nil {
		lm, err := compileLine(r.Duration, r.DurationRe)
		if err != nil {
			return nil, fmt.Errorf("facts: duration: %w", err)
		}
		if lm.gTime < 0 {
			return nil, fmt.Errorf("facts: duration: regex %q has no \"time\" group", lm.re.String())
		}
		x.duration = lm
	}

	for i := range x.ops {
		if p := x.ops[i].prog; p != nil {
			x.maxCaps = max(x.maxCaps, p.ncap)
		}
	}
	if x.duration != nil && x.duration.prog != nil {
		x.maxCaps = max(x.maxCaps, x.duration.prog.ncap)
	}
	x.shareLead()
	if err := applyRoles(sc, r.Roles, kindIDs, fills); err != nil {
		return nil, err
	}
	if err := applyEvidence(sc, r.Evidence, kindIDs, fills); err != nil {
		return nil, err
	}
	sc.finish()
	x.schema = sc
	return x, nil
}

// Version returns the rules' version (knowledge.FactRules.Version), the part of
// SourceKey that changes when the rules change meaning.
func (x *Extractor) Version() string { return x.version }

// SourceKey returns the cache key of the index ExtractTexts(texts...) makes:
// SourceKey(x.Version(), texts...).
func (x *Extractor) SourceKey(texts ...string) string { return SourceKey(x.version, texts...) }

func compileOp(i int, r *knowledge.OpRule) (opMatcher, error) {
	where := fmt.Sprintf("facts: ops[%d] (op %q)", i, r.Op)
	if strings.TrimSpace(r.Op) == "" {
		return opMatcher{}, fmt.Errorf("facts: ops[%d]: no op name", i)
	}
	lm, err := compileLine(r.Regex, r.Re)
	if err != nil {
		return opMatcher{}, fmt.Errorf("%s: %w", where, err)
	}
	m := opMatcher{lineMatcher: *lm, kind: r.Op}
	for _, name := range lm.re.SubexpNames() {
		if name != "" && !slices.Contains(knownGroups, name) {
			return opMatcher{}, fmt.Errorf("%s: unknown named group %q (want %s)", where, name, strings.Join(knownGroups, ", "))
		}
	}
	if m.gTime < 0 {
		return opMatcher{}, fmt.Errorf("%s: regex has no \"time\" group", where)
	}
	m.gPlayer = lm.re.SubexpIndex(fieldPlayer)
	m.gAsset = lm.re.SubexpIndex(fieldAsset)
	m.gPower = lm.re.SubexpIndex(fieldPower)
	m.gUnit = lm.re.SubexpIndex(fieldUnit)
	m.gUnits = lm.re.SubexpIndex(fieldUnits)
	m.gPos = lm.re.SubexpIndex(fieldPos)

	m.unitsRe = r.UnitsRe
	if m.unitsRe == nil && r.Units != "" {
		if m.unitsRe, err = regexp.Compile(r.Units); err != nil {
			return opMatcher{}, fmt.Errorf("%s: units regex: %w", where, err)
		}
	}
	switch {
	case m.gUnits >= 0 && m.unitsRe == nil:
		return opMatcher{}, fmt.Errorf("%s: regex has a \"units\" group but the rule has no units regex to split it", where)
	case m.gUnits < 0 && m.unitsRe != nil:
		return opMatcher{}, fmt.Errorf("%s: units regex %q given but the regex has no \"units\" group", where, m.unitsRe.String())
	case m.unitsRe != nil && m.unitsRe.NumSubexp() < 1:
		return opMatcher{}, fmt.Errorf("%s: units regex %q has no group for one UnitId", where, m.unitsRe.String())
	}
	if m.unitsRe != nil {
		m.unitsPrefix = literalThenDigits(m.unitsRe.String())
	}
	return m, nil
}

// find returns the submatch indexes of line (as regexp.FindStringSubmatchIndex),
// nil when it does not match. buf is scratch space for the program's result; the
// result may be buf.
func (m *lineMatcher) find(line string, buf []int) []int {
	// The longest required literal rejects most lines of other rules for the cost
	// of one substring search, before the program reads the line's time and
	// player again.
	if len(m.literals) > 0 && !strings.Contains(line, m.literals[0]) {
		return nil
	}
	if m.prog != nil {
		sub := buf[:2*m.prog.ncap]
		matched, decided := m.prog.match(line, sub)
		return m.verdict(line, sub, matched, decided)
	}
	return m.verdict(line, nil, false, false)
}

// verdict turns a program's run on line into find's result: sub when it matched,
// nil when it decided the line does not match, and otherwise (no program, or one
// that gave up) the regexp's answer after the prefilter.
func (m *lineMatcher) verdict(line string, sub []int, matched, decided bool) []int {
	switch {
	case matched:
		return sub
	case decided:
		return nil
	case !m.mayMatch(line):
		return nil
	}
	return m.re.FindStringSubmatchIndex(line)
}

// mayMatch reports whether line contains every prefilter literal.
func (m *lineMatcher) mayMatch(line string) bool {
	for _, l := range m.literals {
		if !strings.Contains(line, l) {
			return false
		}
	}
	return true
}

func compileLine(src string, re *regexp.Regexp) (*lineMatcher, error) {
	if re == nil {
		if src == "" {
			return nil, errors.New("no regex")
		}
		var err error
		if re, err = regexp.Compile(src); err != nil {
			return nil, fmt.Errorf("regex: %w", err)
		}
	}
	lm := &lineMatcher{re: re, literals: requiredLiterals(re.String()), gTime: re.SubexpIndex(fieldTime)}
	if p := compileLineProg(re.String()); p != nil && p.ncap == re.NumSubexp()+1 {
		lm.prog = p
	}
	return lm, nil
}

func applyRoles(sc *schema, roles map[string][]string, kindIDs map[string]int, fills map[string]map[string]bool) error {
	names := make([]string, 0, len(roles))
	for name := range roles {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := roleBit(name); !ok {
			return fmt.Errorf("facts: roles: unknown role %q (want %s)", name, strings.Join(knownRoles[:], ", "))
		}
		for _, op := range roles[name] {
			if _, ok := kindIDs[op]; !ok {
				return fmt.Errorf("facts: roles.%s: no op rule makes %q operations", name, op)
			}
		}
	}
	for _, role := range knownRoles {
		ops, declared := roles[role]
		if !declared {
			if _, ok := kindIDs[role]; ok && roleFits(role, role, fills[role]) == nil {
				ops = []string{role}
			}
		}
		bit, _ := roleBit(role)
		for _, op := range ops {
			if err := roleFits(role, op, fills[op]); err != nil {
				return err
			}
			sc.kinds[kindIDs[op]].roles |= bit
		}
	}
	return nil
}

// roleFits checks that the rules of op fill what role needs: a unit for every
// role (roles are facts about units), a power for "power", an asset for
// "producer" (FirstProduction is per asset).
func roleFits(role, op string, f map[string]bool) error {
	switch {
	case !f[fieldUnit] && !f[fieldUnits]:
		return fmt.Errorf("facts: roles.%s: op %q names no unit (no \"unit\" or \"units\" group)", role, op)
	case role == RolePower && !f[fieldPower]:
		return fmt.Errorf("facts: roles.%s: op %q names no power (no \"power\" group)", role, op)
	case role == RoleProducer && !f[fieldAsset]:
		return fmt.Errorf("facts: roles.%s: op %q names no asset (no \"asset\" group)", role, op)
	}
	return nil
}

func applyEvidence(sc *schema, evidence map[string][]string, kindIDs map[string]int, fills map[string]map[string]bool) error {
	types := make([]string, 0, len(evidence))
	for t := range evidence {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		id, ok := kindIDs[t]
		if !ok {
			return fmt.Errorf("facts: evidence.%s: no op rule makes %q operations", t, t)
		}
		params := evidence[t]
		for i, p := range params {
			f := fills[t]
			ok := f[p]
			if p == fieldUnit || p == fieldUnits {
				ok = f[fieldUnit] || f[fieldUnits]
			}
			if !ok {
				if !slices.Contains(knownGroups, p) || p == fieldTime {
					return fmt.Errorf("facts: evidence.%s[%d]: unknown field %q (want player, asset, power, unit, units or pos)", t, i, p)
				}
				return fmt.Errorf("facts: evidence.%s[%d]: field %q is filled by no %q rule", t, i, p, t)
			}
		}
		sc.kinds[id].evidence = slices.Clone(params)
		sc.kinds[id].hasEvidence = true
	}
	return nil
}

// maxPrefilterLiterals bounds how many literals a line is checked for before a
// rule's regexp runs on it.
const maxPrefilterLiterals = 3

// requiredLiterals returns literal strings that every match of the regular
// expression src contains — the maximal literal runs outside optional parts,
// longest first, at most maxPrefilterLiterals — or nil when none is known. They
// are the prefilter that spares most lines a regexp run: checking a short line for
// a few substrings is far cheaper than running the regexp, and several literals
// tell rules apart where one shared by all ("[UnitId]") would not.
func requiredLiterals(src string) []string {
	re, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return nil
	}
	var lits []string
	collectRequired(re.Simplify(), &lits)
	slices.SortStableFunc(lits, func(a, b string) int { return len(b) - len(a) })
	lits = slices.Compact(lits)
	var out []string
	for _, l := range lits {
		// A one-byte literal (the ":" of a time) filters nothing once a longer
		// one is checked.
		if len(out) > 0 && len(l) < 2 {
			break
		}
		if !slices.ContainsFunc(out, func(o string) bool { return strings.Contains(o, l) }) {
			out = append(out, l)
		}
	}
	if len(out) > maxPrefilterLiterals {
		out = out[:maxPrefilterLiterals]
	}
	return out
}

// collectRequired appends the literal runs every match of re contains.
func collectRequired(re *syntax.Regexp, out *[]string) {
	switch re.Op {
	case syntax.OpLiteral, syntax.OpCapture:
		if lit, ok := pureLiteral(re); ok {
			if lit != "" {
				*out = append(*out, lit)
			}
			return
		}
		if re.Op == syntax.OpCapture {
			collectRequired(re.Sub[0], out)
		}
	case syntax.OpPlus:
		collectRequired(re.Sub[0], out)
	case syntax.OpRepeat:
		if re.Min >= 1 {
			collectRequired(re.Sub[0], out)
		}
	case syntax.OpConcat:
		run := ""
		for _, sub := range re.Sub {
			if lit, ok := pureLiteral(sub); ok {
				run += lit
				continue
			}
			if run != "" {
				*out = append(*out, run)
				run = ""
			}
			collectRequired(sub, out)
		}
		if run != "" {
			*out = append(*out, run)
		}
	}
}

// pureLiteral reports whether re matches exactly one case-sensitive string.
func pureLiteral(re *syntax.Regexp) (string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return "", false
		}
		return string(re.Rune), true
	case syntax.OpCapture:
		return pureLiteral(re.Sub[0])
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return "", true
	case syntax.OpConcat:
		var b strings.Builder
		for _, sub := range re.Sub {
			lit, ok := pureLiteral(sub)
			if !ok {
				return "", false
			}
			b.WriteString(lit)
		}
		return b.String(), true
	}
	return "", false
}

// literalThenDigits returns L when src is exactly the literal L followed by one
// capturing group of one or more ASCII digits (L(\d+) or L([0-9]+)), else "".
func literalThenDigits(src string) string {
	re, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return ""
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) != 2 {
		return ""
	}
	lit, digits := re.Sub[0], re.Sub[1]
	if lit.Op != syntax.OpLiteral || lit.Flags&syntax.FoldCase != 0 || len(lit.Rune) == 0 {
		return ""
	}
	if digits.Op != syntax.OpCapture || digits.Cap != 1 {
		return ""
	}
	plus := digits.Sub[0]
	if plus.Op != syntax.OpPlus || plus.Sub[0].Op != syntax.OpCharClass {
		return ""
	}
	if cc := plus.Sub[0].Rune; len(cc) != 2 || cc[0] != '0' || cc[1] != '9' {
		return ""
	}
	return string(lit.Rune)
}
