package validate

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/knowledge"
)

// The claim kinds a pack declares beyond ra3's three (claims.kinds: the orders
// pack's orderClaims) run on cel-go programs over the generic claims.Record:
// `claim` is a map of the claim's present fields (a declared field by name; a
// blank string or an empty list is absent, so has(claim.x) means "given"), with
// `path` and `level` (the canonical English level); record(set, key) is the
// record as a map of its fields, or null; records(set) all of them, in order.
// Dates are timestamps, numbers doubles.

// seedKinds are the kinds the engine's planned rules run on.
var seedKinds = []string{"unitClaims", "eventClaims", "timelineClaims"}

// kindsEngine runs the rules of declared kinds. Their programs call record()
// and records() on the facts of the run at hand, so each instance has its own
// programs, bound to its own state, and runs one check at a time: instances are
// taken from a free list and built when none is free (one per concurrent check).
type kindsEngine struct {
	pack *knowledge.Pack
	mu   sync.Mutex
	free []*kindInstance
}

// kindInstance is one set of compiled programs and the state they read.
type kindInstance struct {
	st    kindState
	rules map[string][]*kindRule // by kind, in file order
}

// kindRule is one rule of a declared kind, as programs.
type kindRule struct {
	*knowledge.Rule
	severity interceptors.Severity
	lets     []kindLet
	when     cel.Program
	args     []cel.Program
	alts     cel.Program
}

type kindLet struct {
	name string
	prog cel.Program
}

// kindState is what the functions of one check read, with the records already
// converted to CEL values (a claim's rules look its record up once each).
type kindState struct {
	ix   *facts.Index
	sep  string
	memo map[string]ref.Val // set + "\x00" + key (or set alone, for records) -> value
}

// recordVal returns the record of set with key as a CEL map, or null.
func (st *kindState) recordVal(set, key string) ref.Val {
	k := set + "\x00" + key
	if v, ok := st.memo[k]; ok {
		return v
	}
	var v ref.Val = types.NullValue
	if r, ok := st.ix.Record(set, key); ok {
		v = types.DefaultTypeAdapter.NativeToValue(r.Map())
	}
	if st.memo == nil {
		st.memo = map[string]ref.Val{}
	}
	st.memo[k] = v
	return v
}

// recordsVal returns every record of set as a CEL list of maps.
func (st *kindState) recordsVal(set string) ref.Val {
	if v, ok := st.memo[set]; ok {
		return v
	}
	recs := st.ix.Records(set)
	out := make([]any, len(recs))
	for i, r := range recs {
		out[i] = r.Map()
	}
	v := types.DefaultTypeAdapter.NativeToValue(out)
	if st.memo == nil {
		st.memo = map[string]ref.Val{}
	}
	st.memo[set] = v
	return v
}

// declaresKinds reports whether the pack's rules name a kind beyond ra3's.
func declaresKinds(pack *knowledge.Pack) bool {
	if pack.RuleSet == nil {
		return false
	}
	for _, r := range pack.RuleSet.Rules {
		for _, kind := range r.Kinds {
			if kind != knowledge.RuleKindEvidence && !slices.Contains(seedKinds, kind) {
				return true
			}
		}
	}
	return false
}

// newKindsEngine compiles the pack's rules of declared kinds once (so a problem
// shows at load); nil when there are none.
func newKindsEngine(pack *knowledge.Pack) (*kindsEngine, error) {
	if !declaresKinds(pack) {
		return nil, nil
	}
	k := &kindsEngine{pack: pack}
	in, err := k.newInstance()
	if err != nil {
		return nil, err
	}
	k.free = append(k.free, in)
	return k, nil
}

func (k *kindsEngine) get() *kindInstance {
	k.mu.Lock()
	if n := len(k.free); n > 0 {
		in := k.free[n-1]
		k.free = k.free[:n-1]
		k.mu.Unlock()
		return in
	}
	k.mu.Unlock()
	in, err := k.newInstance()
	if err != nil {
		panic(err) // newKindsEngine built one from the same rules
	}
	return in
}

func (k *kindsEngine) put(in *kindInstance) {
	clear(in.st.memo)
	in.st = kindState{memo: in.st.memo}
	k.mu.Lock()
	k.free = append(k.free, in)
	k.mu.Unlock()
}

func (k *kindsEngine) newInstance() (*kindInstance, error) {
	pack := k.pack
	in := &kindInstance{rules: map[string][]*kindRule{}}
	var letNames []string
	for _, r := range pack.RuleSet.Rules {
		for _, l := range r.Lets {
			if !slices.Contains(letNames, l.Name) {
				letNames = append(letNames, l.Name)
			}
		}
	}
	env, err := knowledge.NewRuleEnv(in.st.binder, letNames...)
	if err != nil {
		return nil, err
	}
	// Each expression is compiled again from its source: the engine releases the
	// checked ASTs of the expressions it plans (RuleExpr.AST), and an instance
	// may be built at any time. The loader checked the same source in the same
	// environment, so this does not fail for a pack that loaded.
	prog := func(r *knowledge.Rule, x *knowledge.RuleExpr) (cel.Program, error) {
		if x == nil {
			return nil, nil
		}
		ast, iss := env.Compile(x.Source)
		if iss.Err() != nil {
			return nil, fmt.Errorf("rule %s: %s: %w", r.ID, x.Name, iss.Err())
		}
		p, err := env.Program(ast)
		if err != nil {
			return nil, fmt.Errorf("rule %s: %s: %w", r.ID, x.Name, err)
		}
		return p, nil
	}
	for _, r := range pack.RuleSet.Rules {
		var kinds []string
		for _, kind := range r.Kinds {
			if kind != knowledge.RuleKindEvidence && !slices.Contains(seedKinds, kind) {
				kinds = append(kinds, kind)
			}
		}
		if len(kinds) == 0 {
			continue
		}
		sev, err := interceptors.ParseSeverity(r.Severity)
		if err != nil {
			return nil, fmt.Errorf("rule %s: %w", r.ID, err)
		}
		kr := &kindRule{Rule: r, severity: sev}
		for _, l := range r.Lets {
			p, err := prog(r, l)
			if err != nil {
				return nil, err
			}
			kr.lets = append(kr.lets, kindLet{l.Name, p})
		}
		if kr.when, err = prog(r, r.When); err != nil {
			return nil, err
		}
		for _, a := range r.Args {
			p, err := prog(r, a)
			if err != nil {
				return nil, err
			}
			kr.args = append(kr.args, p)
		}
		if kr.alts, err = prog(r, r.RecommendAlternatives); err != nil {
			return nil, err
		}
		for _, kind := range kinds {
			in.rules[kind] = append(in.rules[kind], kr)
		}
	}
	return in, nil
}

// binder implements the functions the declared kinds' rules use, reading st;
// the others are declared only (calling one is a run-time error: rule.error).
func (st *kindState) binder(overload string) cel.OverloadOpt {
	switch overload {
	case "record_string_string":
		return cel.BinaryBinding(func(set, key ref.Val) ref.Val {
			return st.recordVal(fmt.Sprint(set.Value()), fmt.Sprint(key.Value()))
		})
	case "records_string":
		return cel.UnaryBinding(func(set ref.Val) ref.Val { return st.recordsVal(fmt.Sprint(set.Value())) })
	case "level_at_least_string_string":
		return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
			la, oka := claims.ParseLevel(fmt.Sprint(a.Value()))
			lb, okb := claims.ParseLevel(fmt.Sprint(b.Value()))
			if !oka || !okb {
				return types.NewErr("unknown evidence level %v or %v", a.Value(), b.Value())
			}
			return types.Bool(levelRank(la) >= levelRank(lb))
		})
	case "listing_list":
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			s, err := refStrings(v)
			if err != nil {
				return types.NewErr("%v", err)
			}
			return types.String(strings.Join(s, st.sep))
		})
	}
	return nil
}

// run applies the rules of each declared kind to its claims.
func (k *kindsEngine) run(r *run, parsed *claims.Claims) {
	if k == nil || len(parsed.Records) == 0 {
		return
	}
	in := k.get()
	defer k.put(in)
	in.st = kindState{ix: r.ix, sep: r.c.sep, memo: in.st.memo}
	clear(in.st.memo)
	for i := range parsed.Records {
		rec := &parsed.Records[i]
		rules := in.rules[rec.Kind]
		if len(rules) == 0 {
			continue
		}
		claim := claimMap(k.kindFields(rec.Kind), rec)
		for _, rule := range rules {
			in.eval(r, rule, rec, claim)
		}
	}
}

// kindFields returns the declared fields of kind.
func (k *kindsEngine) kindFields(kind string) []string {
	if c := k.pack.Claims; c != nil {
		if ck, ok := c.Kinds.Kind(kind); ok {
			return ck.FieldOrder
		}
	}
	return nil
}

// applies checks a rule's preconditions (levels, has, lacks, requires).
func kindApplies(r *run, rule *kindRule, rec *claims.Record, claim map[string]any) bool {
	if len(rule.Levels) > 0 && !slices.ContainsFunc(rule.Levels, func(l string) bool {
		lv, ok := claims.ParseLevel(l)
		return ok && lv == rec.Level
	}) {
		return false
	}
	for _, f := range rule.Has {
		if _, ok := claim[f]; !ok {
			return false
		}
	}
	for _, f := range rule.Lacks {
		if _, ok := claim[f]; ok {
			return false
		}
	}
	if slices.Contains(rule.Requires, "facts") && !r.hasFacts && r.ix.RecordCount() == 0 {
		return false
	}
	if slices.Contains(rule.Requires, "knowledge") && r.set == nil {
		return false
	}
	return true
}

func (in *kindInstance) eval(r *run, rule *kindRule, rec *claims.Record, claim map[string]any) {
	if !kindApplies(r, rule, rec, claim) {
		return
	}
	vars := map[string]any{"claim": claim, "facts": map[string]any{"present": r.hasFacts}}
	fail := func(err error) {
		RuleErrors.WithLabelValues(r.c.pack.Name, rule.ID).Inc()
		r.add(finding{issue: newIssue(CodeRuleError, interceptors.Info, rec.Path, interceptors.Recommendation{},
			"rule", rule.ID, "error", err.Error())})
	}
	eval := func(p cel.Program) (ref.Val, error) {
		v, _, err := p.Eval(vars)
		return v, err
	}
	for _, l := range rule.lets {
		v, err := eval(l.prog)
		if err != nil {
			fail(err)
			return
		}
		vars[l.name] = v
	}
	v, err := eval(rule.when)
	if err != nil {
		fail(err)
		return
	}
	if b, ok := v.(types.Bool); !ok || !bool(b) {
		if !ok && v != types.NullValue {
			fail(fmt.Errorf("the condition is a %s, not a bool", v.Type().TypeName()))
		}
		return
	}
	is := interceptors.Issue{Code: rule.Code, Severity: rule.severity, Path: rec.Path, Validator: ValidatorName}
	for i, p := range rule.args {
		v, err := eval(p)
		if err != nil {
			fail(err)
			return
		}
		if v == types.NullValue {
			continue
		}
		if is.Args == nil {
			is.Args = map[string]string{}
		}
		is.Args[rule.Rule.Args[i].Name] = refText(v)
	}
	is.Recommendation.EvidenceLevel = rule.RecommendLevel
	is.Recommendation.Remove = rule.RecommendRemove
	if rule.alts != nil {
		v, err := eval(rule.alts)
		if err != nil {
			fail(err)
			return
		}
		if is.Recommendation.Alternatives, err = refStrings(v); err != nil {
			fail(err)
			return
		}
	}
	is.Facts = recordFacts(r.ix, is.Args, r.c.settings.MaxFactsPerIssue)
	r.add(finding{issue: is})
}

// recordFacts returns the records an issue's arguments name by key (an order id
// in args.order), each as one line — the set, the key and the record's fields —
// for the revision request's "relevant facts", at most max.
func recordFacts(ix *facts.Index, args map[string]string, max int) []interceptors.FactLine {
	if ix.RecordCount() == 0 || len(args) == 0 {
		return nil
	}
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []interceptors.FactLine
	seen := map[string]bool{}
	for _, set := range ix.RecordSets() {
		for _, name := range names {
			rec, ok := ix.Record(set, args[name])
			if !ok || seen[set+"\x00"+rec.Key] || (max > 0 && len(out) >= max) {
				continue
			}
			seen[set+"\x00"+rec.Key] = true
			out = append(out, interceptors.FactLine{Text: recordLine(rec)})
		}
	}
	return out
}

// recordLine renders a record as "orders A-1001: status shipped, total 59.9,
// placed 2026-03-01".
func recordLine(rec facts.Record) string {
	var b strings.Builder
	b.WriteString(rec.Set)
	b.WriteByte(' ')
	b.WriteString(rec.Key)
	b.WriteByte(':')
	first := true
	for _, name := range rec.Fields() {
		v, _ := rec.Field(name)
		if s, ok := v.(string); ok && s == rec.Key {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteByte(' ')
		b.WriteString(name)
		b.WriteByte(' ')
		b.WriteString(refText(types.DefaultTypeAdapter.NativeToValue(v)))
	}
	return b.String()
}

// claimMap is a claim as the rules see it: its present fields, path and level.
func claimMap(fields []string, rec *claims.Record) map[string]any {
	m := map[string]any{"path": rec.Path, "level": rec.Level.String()}
	for _, f := range fields {
		v, ok := rec.Field(f)
		if !ok {
			continue
		}
		switch x := v.(type) {
		case string:
			if x == "" {
				continue
			}
		case []string:
			if len(x) == 0 {
				continue
			}
		case []claims.Evidence:
			raws := make([]string, 0, len(x))
			for _, e := range x {
				raws = append(raws, e.Raw)
			}
			if len(raws) == 0 {
				continue
			}
			v = raws
		}
		m[f] = v
	}
	if _, ok := m["evidenceLevel"]; !ok && rec.LevelRaw != "" {
		m["evidenceLevel"] = rec.LevelRaw
	}
	return m
}

// refText renders an argument: strings as they are, numbers in decimal (two
// decimals for a fractional double), dates as dates, lists joined with ", ".
func refText(v ref.Val) string {
	switch x := v.Value().(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		return strconv.FormatFloat(x, 'f', 2, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		if x.Hour() == 0 && x.Minute() == 0 && x.Second() == 0 && x.Nanosecond() == 0 {
			return x.Format("2006-01-02")
		}
		return x.Format(time.RFC3339)
	}
	if s, err := refStrings(v); err == nil {
		return strings.Join(s, ", ")
	}
	return fmt.Sprint(v.Value())
}

// refStrings reads a CEL list as strings.
func refStrings(v ref.Val) ([]string, error) {
	if v == types.NullValue {
		return nil, nil
	}
	native, err := v.ConvertToNative(stringsType)
	if err != nil {
		return nil, fmt.Errorf("want a list of strings, got a %s", v.Type().TypeName())
	}
	return native.([]string), nil
}

var stringsType = reflect.TypeFor[[]string]()
