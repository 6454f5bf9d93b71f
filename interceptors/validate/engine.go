package validate

import (
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
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

// ruleCostLimit bounds the CEL cost of one evaluation of one expression: a rule
// that would loop over a huge list fails (rule.error) instead of stalling the
// request.
const ruleCostLimit = 1_000_000

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
	pack     string
	evidence []*engineRule            // rules of kind evidence, in file order
	byKind   map[string][]*engineRule // claim rules by kind, in file order
	exprs    []*knowledge.RuleExpr    // every expression, by id
	lets     int                      // let slots
	letNames []string                 // every let name of the file

	mu   sync.Mutex
	free []*instance
}

// engineRule is a rule with its expressions numbered.
type engineRule struct {
	*knowledge.Rule
	severity interceptors.Severity
	has      []claimField
	lacks    []claimField
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
	e := &engine{pack: pack.Name, byKind: map[string][]*engineRule{}}
	if pack.RuleSet == nil {
		return e, nil
	}
	add := func(x *knowledge.RuleExpr) int {
		if x == nil {
			return -1
		}
		e.exprs = append(e.exprs, x)
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
			er.has = append(er.has, fieldOf(f))
		}
		for _, f := range r.Lacks {
			er.lacks = append(er.lacks, fieldOf(f))
		}
		er.facts = slices.Contains(r.Requires, "facts")
		er.know = slices.Contains(r.Requires, "knowledge")
		chain := ""
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
			er.lets = append(er.lets, letRef{name: l.Name, slot: slot, expr: add(l)})
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
	// Build one instance now: a program that cannot be planned fails here, at
	// load, not on the first answer.
	in, err := e.newInstance()
	if err != nil {
		return nil, err
	}
	e.free = append(e.free, in)
	return e, nil
}

// empty reports an engine without rules.
func (e *engine) empty() bool { return len(e.exprs) == 0 }

// instance is the engine's programs bound to one evaluation state.
type instance struct {
	e     *engine
	st    *evalState
	progs []cel.Program
}

func (e *engine) newInstance() (*instance, error) {
	st := &evalState{letVals: make([]ref.Val, e.lets), letGen: make([]uint32, e.lets)}
	st.act.st = st
	env, err := knowledge.NewRuleEnv(st.bind, e.letNames...)
	if err != nil {
		return nil, fmt.Errorf("pack %s: rule environment: %w", e.pack, err)
	}
	in := &instance{e: e, st: st, progs: make([]cel.Program, len(e.exprs))}
	for i, x := range e.exprs {
		p, err := env.Program(x.AST, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(ruleCostLimit))
		if err != nil {
			return nil, fmt.Errorf("pack %s: rule expression %s at line %d: %w", e.pack, x.Name, x.Line, err)
		}
		in.progs[i] = p
	}
	st.progs = in.progs
	return in, nil
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
	e.mu.Lock()
	e.free = append(e.free, in)
	e.mu.Unlock()
}

// runClaims applies the engine's rules to every claim of parsed: per claim, the
// evidence rules on each item, then the claim rules of its kind.
func (e *engine) runClaims(r *run, parsed *claims.Claims) {
	if e.empty() {
		return
	}
	in := e.get()
	defer e.put(in)
	in.st.r = r
	in.st.facts = factsVal{present: r.hasFacts, end: r.end, tol: r.tol}
	unitRules := e.byKind["unitClaims"]
	for i := range parsed.UnitClaims {
		in.claim(&claimVal{u: &parsed.UnitClaims[i]}, unitRules)
	}
	eventRules := e.byKind["eventClaims"]
	for i := range parsed.EventClaims {
		in.claim(&claimVal{c: &parsed.EventClaims[i]}, eventRules)
	}
	timelineRules := e.byKind["timelineClaims"]
	for i := range parsed.TimelineClaims {
		in.claim(&claimVal{c: &parsed.TimelineClaims[i]}, timelineRules)
	}
}

// claim runs the evidence rules on each of the claim's items, then the claim's
// rules.
func (in *instance) claim(cv *claimVal, rules []*engineRule) {
	st := in.st
	st.claim = cv
	evs := cv.evidence()
	cv.items = cv.items[:0]
	for i := range evs {
		cv.items = append(cv.items, &itemVal{ev: &evs[i], st: st})
	}
	if len(in.e.evidence) > 0 {
		for _, iv := range cv.items {
			it := iv.(*itemVal)
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
	if rule.facts && !r.hasFacts {
		return false
	}
	if rule.know && r.set == nil {
		return false
	}
	if rule.levels != 0 && rule.levels&(1<<cv.level()) == 0 {
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
	if it != nil {
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
	}
	return true
}

// eval runs one rule whose preconditions hold; it reports whether the rule
// fired (an issue was added). A failing expression adds rule.error instead.
func (in *instance) eval(rule *engineRule, path string, it *itemVal) bool {
	st := in.st
	st.act.lets = rule.lets
	v, err := in.value(rule.when)
	if err != nil {
		in.fail(rule, path, err)
		return false
	}
	if b, ok := v.(types.Bool); !ok || !bool(b) {
		if !ok && v != types.NullValue {
			in.fail(rule, path, fmt.Errorf("when is a %s, not a bool", v.Type().TypeName()))
		}
		return false
	}
	is := interceptors.Issue{Code: rule.Code, Severity: rule.severity, Path: path, Validator: ValidatorName}
	for i, id := range rule.args {
		v, err := in.value(id)
		if err != nil {
			in.fail(rule, path, err)
			return false
		}
		if v == types.NullValue {
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
		v, err := in.value(rule.player)
		if err != nil {
			in.fail(rule, path, err)
			return false
		}
		if s, ok := v.(types.String); ok {
			is.Recommendation.Player = string(s)
		}
	}
	f := finding{issue: is}
	var err2 error
	if rule.alts >= 0 {
		if f.issue.Recommendation.Alternatives, err2 = in.strings(rule.alts); err2 != nil {
			in.fail(rule, path, err2)
			return false
		}
	}
	if it != nil && rule.units < 0 && rule.assets < 0 && rule.powers < 0 {
		fields, _ := it.kind().EvidenceFields()
		f.units, f.assets, f.powers = itemSubjects(it.ev, fields)
	}
	if rule.units >= 0 {
		v, err := in.value(rule.units)
		if err != nil {
			in.fail(rule, path, err)
			return false
		}
		if f.units, err = intList(v); err != nil {
			in.fail(rule, path, err)
			return false
		}
	}
	if rule.assets >= 0 {
		if f.assets, err2 = in.strings(rule.assets); err2 != nil {
			in.fail(rule, path, err2)
			return false
		}
	}
	if rule.powers >= 0 {
		if f.powers, err2 = in.strings(rule.powers); err2 != nil {
			in.fail(rule, path, err2)
			return false
		}
	}
	st.r.add(f)
	return true
}

// value evaluates expression id with the instance's activation.
func (in *instance) value(id int) (ref.Val, error) {
	v, _, err := in.progs[id].Eval(&in.st.act)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// strings evaluates expression id as a list of strings (nil for null or empty).
func (in *instance) strings(id int) ([]string, error) {
	v, err := in.value(id)
	if err != nil {
		return nil, err
	}
	return stringList(v)
}

// fail reports a rule that failed at run time: an Info issue and the metric.
func (in *instance) fail(rule *engineRule, path string, err error) {
	RuleErrors.WithLabelValues(in.e.pack, rule.ID).Inc()
	in.st.r.add(finding{issue: newIssue(CodeRuleError, interceptors.Info, path, interceptors.Recommendation{},
		"rule", rule.ID, "error", err.Error())})
}

// argText renders a rule argument: strings as they are, numbers in decimal,
// durations as a game clock, lists joined with the pack's separator.
func argText(v ref.Val) string {
	switch x := v.(type) {
	case types.String:
		return string(x)
	case types.Int:
		return strconv.FormatInt(int64(x), 10)
	case types.Uint:
		return strconv.FormatUint(uint64(x), 10)
	case types.Double:
		return strconv.FormatFloat(float64(x), 'g', -1, 64)
	case types.Bool:
		return strconv.FormatBool(bool(x))
	case types.Duration:
		return interceptors.FormatClock(x.Duration)
	}
	if s, err := stringList(v); err == nil {
		return joinList(s, ", ")
	}
	return fmt.Sprint(v.Value())
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

// stringList converts a CEL list of strings (nil for null and for an empty list).
func stringList(v ref.Val) ([]string, error) {
	if v == types.NullValue {
		return nil, nil
	}
	l, ok := v.(interface {
		Size() ref.Val
		Get(ref.Val) ref.Val
	})
	if !ok {
		return nil, fmt.Errorf("want a list of strings, got %s", v.Type().TypeName())
	}
	n := int(l.Size().(types.Int))
	if n == 0 {
		return nil, nil
	}
	out := make([]string, n)
	for i := range n {
		s, ok := l.Get(types.Int(i)).(types.String)
		if !ok {
			return nil, fmt.Errorf("want a list of strings")
		}
		out[i] = string(s)
	}
	return out, nil
}

// intList converts a CEL list of ints (nil for null and for an empty list).
func intList(v ref.Val) ([]int64, error) {
	if v == types.NullValue {
		return nil, nil
	}
	l, ok := v.(interface {
		Size() ref.Val
		Get(ref.Val) ref.Val
	})
	if !ok {
		return nil, fmt.Errorf("want a list of ints, got %s", v.Type().TypeName())
	}
	n := int(l.Size().(types.Int))
	if n == 0 {
		return nil, nil
	}
	out := make([]int64, n)
	for i := range n {
		x, ok := l.Get(types.Int(i)).(types.Int)
		if !ok {
			return nil, fmt.Errorf("want a list of ints")
		}
		out[i] = int64(x)
	}
	return out, nil
}
