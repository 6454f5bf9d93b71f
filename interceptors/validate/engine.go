package validate

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/knowledge"
)

// CodeRuleError is the Info issue a pack rule that fails at run time reports
// (args rule, error), instead of its finding; the answer is still checked by the
// other rules.
const CodeRuleError = "rule.error"

// RuleErrors counts the pack rules that failed at run time, by pack and rule
// (factgate_rule_errors_total). The proxy registers it with its metrics.
var RuleErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "factgate_rule_errors_total",
	Help: "Pack rules (rules.yaml) that failed at run time on an answer, by pack and rule; each also gave the answer an Info issue rule.error.",
}, []string{"pack", "rule"})

// engine runs one pack's rules (knowledge.RuleSet). It is built once per Checker
// and is safe for concurrent use: each Check takes an instance (the programs bound
// to one evaluation state) from its free list.
type engine struct {
	*engineCore

	mu   sync.Mutex
	free []*instance
}

// engineCore is a pack's rules planned for the engine, once per loaded rule set
// (knowledge.RuleSet.Compiled) and shared by its checkers.
type engineCore struct {
	pack     string
	evidence []*engineRule            // rules of kind evidence, in file order
	byKind   map[string][]*engineRule // claim rules by kind, in file order
	exprs    []*knowledge.RuleExpr    // every expression, by id
	exprLets [][]letRef               // the lets each expression sees, by id
	fields   map[string][]string      // the declared fields of each declared kind, in order
	planned  int                      // expressions the planner takes (the others run as cel-go programs)
	lets     int                      // let slots
	letNames []string                 // every let name of the file
	nodes    []node                   // the planned expressions, by id (nil: a cel-go program)
	sizes    []frame                  // their frames' sizes (len of vars and scratch)
}

// engineRule is a rule with its expressions numbered.
type engineRule struct {
	*knowledge.Rule
	severity interceptors.Severity
	has      []claimField // fields of other claim shapes (fieldOther)
	lacks    []claimField
	hasMask  uint16 // the typed fields it needs present (bit 1<<field)
	lackMask uint16 // and absent
	levels   levelSet
	facts    bool // requires facts
	know     bool // requires knowledge
	lets     []letRef
	when     int
	args     []int // expression ids, parallel to Rule.Args
	player   int   // -1: none
	alts     int
	units    int
	assets   int
	powers   int
}

// letRef maps a let name to its slot for one rule.
type letRef struct {
	name string
	slot int
	expr int
}

// levelSet is a set of claims.Level (bit i: level i); 0 means any level.
type levelSet uint8

func newEngine(pack *knowledge.Pack) (*engine, error) {
	if pack.RuleSet == nil {
		return &engine{engineCore: &engineCore{pack: pack.Name, byKind: map[string][]*engineRule{}}}, nil
	}
	core, err := pack.RuleSet.Compiled(func() (any, error) { return planCore(pack, true) })
	if err != nil {
		return nil, err
	}
	e := &engine{engineCore: core.(*engineCore)}
	// Build one instance now: a program that cannot be planned fails here, at
	// load, not on the first answer.
	in, err := e.newInstance()
	if err != nil {
		return nil, err
	}
	e.free = append(e.free, in)
	return e, nil
}

// planCore numbers a pack's rules and their expressions and plans each one (with
// usePlanner false, every expression runs as a cel-go program: the test of the
// programs' path).
func planCore(pack *knowledge.Pack, usePlanner bool) (*engineCore, error) {
	e := &engineCore{pack: pack.Name, byKind: map[string][]*engineRule{}, fields: map[string][]string{}}
	if c := pack.Claims; c != nil {
		for _, r := range pack.RuleSet.Rules {
			for _, k := range r.Kinds {
				if ck, ok := c.Kinds.Kind(k); ok {
					e.fields[k] = ck.FieldOrder
				}
			}
		}
	}
	var lets []letRef // the current rule's lets so far
	add := func(x *knowledge.RuleExpr) int {
		if x == nil {
			return -1
		}
		e.exprs = append(e.exprs, x)
		e.exprLets = append(e.exprLets, slices.Clone(lets))
		return len(e.exprs) - 1
	}
	slots := map[string]int{} // the chain of a let's expressions -> slot
	for _, r := range pack.RuleSet.Rules {
		sev, err := interceptors.ParseSeverity(r.Severity)
		if err != nil {
			return nil, fmt.Errorf("rule %s: %w", r.ID, err)
		}
		er := &engineRule{Rule: r, severity: sev, player: -1, alts: -1, units: -1, assets: -1, powers: -1}
		for _, lv := range r.Levels {
			l, ok := claims.ParseLevel(lv)
			if !ok {
				return nil, fmt.Errorf("rule %s: unknown level %q", r.ID, lv)
			}
			er.levels |= 1 << l
		}
		for _, f := range r.Has {
			if cf := fieldOf(f); cf.id != fieldOther {
				er.hasMask |= 1 << cf.id
			} else {
				er.has = append(er.has, cf)
			}
		}
		for _, f := range r.Lacks {
			if cf := fieldOf(f); cf.id != fieldOther {
				er.lackMask |= 1 << cf.id
			} else {
				er.lacks = append(er.lacks, cf)
			}
		}
		er.facts = slices.Contains(r.Requires, "facts")
		er.know = slices.Contains(r.Requires, "knowledge")
		chain := ""
		lets = nil
		for _, l := range r.Lets {
			if l == nil || l.AST == nil {
				return nil, fmt.Errorf("rule %s: let not compiled", r.ID)
			}
			chain += l.Name + "=" + l.Source + "\x00"
			slot, ok := slots[chain]
			if !ok {
				slot = e.lets
				e.lets++
				slots[chain] = slot
			}
			ref := letRef{name: l.Name, slot: slot, expr: add(l)}
			er.lets = append(er.lets, ref)
			lets = append(lets, ref)
			if !slices.Contains(e.letNames, l.Name) {
				e.letNames = append(e.letNames, l.Name)
			}
		}
		if r.When == nil || r.When.AST == nil {
			return nil, fmt.Errorf("rule %s: condition not compiled", r.ID)
		}
		er.when = add(r.When)
		for _, a := range r.Args {
			er.args = append(er.args, add(a))
		}
		er.player, er.alts = add(r.RecommendPlayer), add(r.RecommendAlternatives)
		er.units, er.assets, er.powers = add(r.RelatedUnits), add(r.RelatedAssets), add(r.RelatedPowers)
		for _, k := range r.Kinds {
			if k == knowledge.RuleKindEvidence {
				e.evidence = append(e.evidence, er)
			} else {
				e.byKind[k] = append(e.byKind[k], er)
			}
		}
	}
	e.nodes, e.sizes = make([]node, len(e.exprs)), make([]frame, len(e.exprs))
	for i, x := range e.exprs {
		if !usePlanner {
			break
		}
		if n, fr, ok := plan(x.AST, e.exprLets[i]); ok {
			e.nodes[i], e.sizes[i] = n, fr
			e.planned++
		}
	}
	for i, x := range e.exprs {
		if e.nodes[i] != nil {
			x.AST = nil // planned: the checked expression is no longer needed
		}
	}
	return e, nil
}

// typedKinds are the claim kinds read into typed claims (ra3's), which runClaims
// checks; runRecords checks every other kind from its claims.Record.
var typedKinds = []string{"unitClaims", "eventClaims", "timelineClaims"}

// empty reports an engine without rules.
func (e *engine) empty() bool { return len(e.exprs) == 0 }

// instance is the engine's expressions bound to one evaluation state: each one
// planned (a node) or, when the planner does not take it, a cel-go program.
type instance struct {
	e     *engine
	st    *evalState
	exprs []planned // by expression id
	progs []cel.Program
	cv    claimVal // the claim being checked (its storage reused)
	run   run      // the check the instance serves
}

func (e *engine) newInstance() (*instance, error) {
	st := &evalState{letVals: make([]val, e.lets), letGen: make([]uint32, e.lets), strs: make([][]string, 0, 256)}
	st.act.st = st
	in := &instance{e: e, st: st, exprs: make([]planned, len(e.exprs)), progs: make([]cel.Program, len(e.exprs))}
	st.in = in
	var env *cel.Env
	for i, x := range e.exprs {
		if n := e.nodes[i]; n != nil {
			sz := e.sizes[i]
			in.exprs[i] = planned{n: n, f: frame{st: st, vars: make([]val, len(sz.vars)), scratch: make([][]val, len(sz.scratch))}}
			continue
		}
		if env == nil {
			var err error
			if env, err = knowledge.NewRuleEnv(st.bind, e.letNames...); err != nil {
				return nil, fmt.Errorf("pack %s: rule environment: %w", e.pack, err)
			}
		}
		// The cost limit was checked at load on the worst case
		// (knowledge.RuleCostLimit): tracking it here would cost more than the
		// expressions themselves.
		p, err := env.Program(x.AST, cel.EvalOptions(cel.OptOptimize))
		if err != nil {
			return nil, fmt.Errorf("pack %s: rule expression %s at line %d: %w", e.pack, x.Name, x.Line, err)
		}
		in.progs[i] = p
	}
	return in, nil
}

// planned is a planned expression with its frame (nil n: a cel-go program).
type planned struct {
	n node
	f frame
}

// get returns a free instance, building one when every instance is in use.
func (e *engine) get() *instance {
	e.mu.Lock()
	if n := len(e.free); n > 0 {
		in := e.free[n-1]
		e.free = e.free[:n-1]
		e.mu.Unlock()
		return in
	}
	e.mu.Unlock()
	in, err := e.newInstance()
	if err != nil {
		// newEngine built one from the same expressions: this cannot fail.
		panic(err)
	}
	return in
}

func (e *engine) put(in *instance) {
	in.st.reset()
	in.run = run{out: in.run.out[:0]}
	in.cv.set(nil, nil, nil)
	e.mu.Lock()
	e.free = append(e.free, in)
	e.mu.Unlock()
}

// runClaims applies the engine's rules to every claim of parsed, for the
// instance's run: per claim, the evidence rules on each item, then the claim
// rules of its kind.
func (in *instance) runClaims(parsed *claims.Claims) {
	e := in.e
	if e.empty() {
		return
	}
	r := &in.run
	in.st.r = r
	in.st.facts = factsVal{present: r.hasFacts, end: r.end, tol: r.tol}
	unitRules := e.byKind["unitClaims"]
	for i := range parsed.UnitClaims {
		in.cv.set(&parsed.UnitClaims[i], nil, in.st)
		in.claim(&in.cv, unitRules)
	}
	eventRules := e.byKind["eventClaims"]
	for i := range parsed.EventClaims {
		in.cv.set(nil, &parsed.EventClaims[i], in.st)
		in.claim(&in.cv, eventRules)
	}
	timelineRules := e.byKind["timelineClaims"]
	for i := range parsed.TimelineClaims {
		in.cv.set(nil, &parsed.TimelineClaims[i], in.st)
		in.claim(&in.cv, timelineRules)
	}
}

// runRecords applies the engine's rules to the claims of the kinds the pack
// declares beyond the typed ones (claims.Record), for the instance's run, as
// runClaims does to the typed claims.
func (in *instance) runRecords(parsed *claims.Claims) {
	e := in.e
	if e.empty() || len(parsed.Records) == 0 {
		return
	}
	r := &in.run
	in.st.r = r
	in.st.facts = factsVal{present: r.hasFacts, end: r.end, tol: r.tol}
	for i := range parsed.Records {
		rec := &parsed.Records[i]
		rules, ok := e.byKind[rec.Kind]
		if !ok || slices.Contains(typedKinds, rec.Kind) {
			continue
		}
		in.cv.setRecord(rec, e.fields[rec.Kind], in.st)
		in.claim(&in.cv, rules)
	}
}

// claim runs the evidence rules on each of the claim's items, then the claim's
// rules.
func (in *instance) claim(cv *claimVal, rules []*engineRule) {
	st := in.st
	st.claim = cv
	if len(in.e.evidence) > 0 {
		for i := range cv.its {
			it := &cv.its[i]
			st.item = it
			st.gen++
			fired := false
			for _, rule := range in.e.evidence {
				if !in.applies(rule, cv, it) {
					continue
				}
				if in.eval(rule, it.ev.Path, it) {
					fired = true
					if rule.Stop {
						break
					}
				}
			}
			it.verified = it.ev.Structured && st.r.hasFacts && !fired
		}
	}
	st.item = nil
	st.gen++
	for _, rule := range rules {
		if !in.applies(rule, cv, nil) {
			continue
		}
		if in.eval(rule, cv.path(), nil) && rule.Stop {
			break
		}
	}
	st.claim = nil
}

// applies checks a rule's preconditions, in Go, before any expression runs.
func (in *instance) applies(rule *engineRule, cv *claimVal, it *itemVal) bool {
	r := in.st.r
	if rule.facts && !r.hasFacts && (cv.rec == nil || r.ix.RecordCount() == 0) {
		return false
	}
	if rule.know && r.set == nil {
		return false
	}
	if rule.levels != 0 && rule.levels&(1<<cv.level()) == 0 {
		return false
	}
	if cv.present&rule.hasMask != rule.hasMask || cv.present&rule.lackMask != 0 {
		return false
	}
	for _, f := range rule.has {
		if !cv.has(f) {
			return false
		}
	}
	for _, f := range rule.lacks {
		if cv.has(f) {
			return false
		}
	}
	return it == nil || itemApplies(rule, it)
}

// itemApplies checks an evidence rule's preconditions on the item.
func itemApplies(rule *engineRule, it *itemVal) bool {
	if rule.Structured && !it.ev.Structured {
		return false
	}
	if len(rule.Roles) > 0 {
		k := it.kind()
		for _, role := range rule.Roles {
			if !k.HasRole(role) {
				return false
			}
		}
	}
	return true
}

// eval runs one rule whose preconditions hold; it reports whether the rule
// fired (an issue was added). A failing expression adds rule.error instead.
func (in *instance) eval(rule *engineRule, path string, it *itemVal) bool {
	st := in.st
	st.act.lets = rule.lets
	v := in.value(rule.when)
	if v.k != vBool {
		if v.k != vNull {
			in.fail(rule, path, boolErr(v).err())
		}
		return false
	}
	if !v.b {
		return false
	}
	is := interceptors.Issue{Code: rule.Code, Severity: rule.severity, Path: path, Validator: ValidatorName}
	for i, id := range rule.args {
		v := in.value(id)
		if v.k == vErr {
			in.fail(rule, path, v.err())
			return false
		}
		if v.k == vNull {
			continue
		}
		if is.Args == nil {
			is.Args = make(map[string]string, len(rule.args))
		}
		is.Args[rule.Rule.Args[i].Name] = argText(v)
	}
	is.Recommendation.EvidenceLevel = rule.RecommendLevel
	is.Recommendation.Remove = rule.RecommendRemove
	if rule.player >= 0 {
		v := in.value(rule.player)
		if v.k == vErr {
			in.fail(rule, path, v.err())
			return false
		}
		is.Recommendation.Player = v.s
	}
	f := finding{issue: is}
	var err error
	if rule.alts >= 0 {
		if f.issue.Recommendation.Alternatives, err = valStrings(in.value(rule.alts)); err != nil {
			in.fail(rule, path, err)
			return false
		}
	}
	if it != nil && rule.units < 0 && rule.assets < 0 && rule.powers < 0 {
		fields, _ := it.kind().EvidenceFields()
		f.units, f.assets, f.powers = itemSubjects(it.ev, fields)
	}
	if rule.units >= 0 {
		if f.units, err = valInts(in.value(rule.units)); err != nil {
			in.fail(rule, path, err)
			return false
		}
	}
	if rule.assets >= 0 {
		if f.assets, err = valStrings(in.value(rule.assets)); err != nil {
			in.fail(rule, path, err)
			return false
		}
	}
	if rule.powers >= 0 {
		if f.powers, err = valStrings(in.value(rule.powers)); err != nil {
			in.fail(rule, path, err)
			return false
		}
	}
	if it == nil && st.claim.rec != nil {
		f.issue.Facts = recordFacts(st.r.ix, f.issue.Args, st.r.c.settings.MaxFactsPerIssue)
	}
	st.r.add(f)
	return true
}

// value evaluates expression id: its node, else its cel-go program with the
// instance's activation.
func (in *instance) value(id int) val {
	if x := &in.exprs[id]; x.n != nil {
		return x.n(&x.f)
	}
	return in.program(id)
}

// program evaluates expression id as a cel-go program.
func (in *instance) program(id int) val {
	v, _, err := in.progs[id].Eval(&in.st.act)
	if err != nil {
		return val{k: vErr, o: err}
	}
	return toVal(v)
}

// fail reports a rule that failed at run time: an Info issue and the metric.
func (in *instance) fail(rule *engineRule, path string, err error) {
	RuleErrors.WithLabelValues(in.e.pack, rule.ID).Inc()
	in.st.r.add(finding{issue: newIssue(CodeRuleError, interceptors.Info, path, interceptors.Recommendation{},
		"rule", rule.ID, "error", err.Error())})
}

// argText renders a rule argument: strings as they are, numbers in decimal,
// durations as a game clock, lists joined with ", ".
func argText(v val) string {
	switch v.k {
	case vStr:
		return v.s
	case vInt:
		return strconv.FormatInt(v.i, 10)
	case vBool:
		return strconv.FormatBool(v.b)
	case vDur:
		return interceptors.FormatClock(time.Duration(v.i))
	case vRef:
		return refText(v.o.(ref.Val))
	}
	if s, err := valStrings(v); err == nil {
		return joinList(s, ", ")
	}
	return ""
}

func joinList(s []string, sep string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	n := len(sep) * (len(s) - 1)
	for _, x := range s {
		n += len(x)
	}
	b := make([]byte, 0, n)
	for i, x := range s {
		if i > 0 {
			b = append(b, sep...)
		}
		b = append(b, x...)
	}
	return string(b)
}

// valStrings converts a list of strings (nil for null and for an empty list);
// the slice is the caller's.
func valStrings(v val) ([]string, error) {
	switch v.k {
	case vNull:
		return nil, nil
	case vErr:
		return nil, v.err()
	case vStrs:
		if len(v.strs()) == 0 {
			return nil, nil
		}
		return slices.Clone(v.strs()), nil
	case vList:
		l := v.list()
		if len(l) == 0 {
			return nil, nil
		}
		out := make([]string, len(l))
		for i, x := range l {
			if x.k != vStr {
				return nil, fmt.Errorf("want a list of strings, got a %s in it", x.kindName())
			}
			out[i] = x.s
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list of strings, got a %s", v.kindName())
}

// valInts converts a list of ints (nil for null and for an empty list).
func valInts(v val) ([]int64, error) {
	switch v.k {
	case vNull:
		return nil, nil
	case vErr:
		return nil, v.err()
	case vList:
		l := v.list()
		if len(l) == 0 {
			return nil, nil
		}
		out := make([]int64, len(l))
		for i, x := range l {
			if x.k != vInt {
				return nil, fmt.Errorf("want a list of ints, got a %s in it", x.kindName())
			}
			out[i] = x.i
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list of ints, got a %s", v.kindName())
}
