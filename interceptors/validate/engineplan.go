package validate

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/factgate/factgate/knowledge"
)

// The planner: every rule expression, checked by cel-go at load, is turned into a
// tree of Go closures over plain values (val) when it keeps to the part of CEL
// rules use — literals, the variables, fields and has(), the operators, ?:, in,
// indexing, size, string(), the comprehensions of the macros (filter, exists,
// all, map) and the rule functions. Those run without cel-go's interpreter:
// without attribute resolution, boxing or per-iteration lists, which cost several
// times the Go rules the engine replaced. An expression that uses anything else
// runs as a cel-go program (cel.OptOptimize, the pooled activation); both give
// the same values.

// vkind is the kind of a val.
type vkind uint8

const (
	vNull vkind = iota
	vBool
	vInt
	vStr
	vDur
	vList // o: *[]val
	vStrs // o: *[]string, a list of strings as the claims, the facts and the knowledge give them
	vObj  // o: *claimVal, *itemVal, *factsVal, entryVal
	vErr  // o: error
	vRef  // o: any other cel-go value (a map, a double, a timestamp...), from a program
)

// val is a rule value, passed by value (48 bytes): scalars never allocate, and
// lists point at memory that already exists (the claim's, the facts', scratch).
type val struct {
	k vkind
	b bool
	i int64 // an int, or a duration in nanoseconds
	s string
	o any
}

var noStrings = new([]string)

func listV(p *[]val) val { return val{k: vList, o: p} }

// newList returns a list value over fresh memory.
func newList(l []val) val { return val{k: vList, o: &l} }

// list returns a vList's elements.
func (v val) list() []val {
	if p, ok := v.o.(*[]val); ok {
		return *p
	}
	return nil
}

// strs returns a vStrs's elements.
func (v val) strs() []string {
	if p, ok := v.o.(*[]string); ok {
		return *p
	}
	return nil
}

var (
	nullV  = val{}
	trueV  = val{k: vBool, b: true}
	falseV = val{k: vBool}
)

func boolV(b bool) val                 { return val{k: vBool, b: b} }
func intV(i int64) val                 { return val{k: vInt, i: i} }
func strV(s string) val                { return val{k: vStr, s: s} }
func durV(d time.Duration) val         { return val{k: vDur, i: int64(d)} }
func strsV(p *[]string) val            { return val{k: vStrs, o: p} }
func errV(format string, a ...any) val { return val{k: vErr, o: fmt.Errorf(format, a...)} }

func (v val) err() error {
	if v.k == vErr {
		return v.o.(error)
	}
	return nil
}

// size is the length of a list (or -1).
func (v val) size() int {
	switch v.k {
	case vList:
		return len(v.list())
	case vStrs:
		return len(v.strs())
	}
	return -1
}

// at returns a list's element i.
func (v val) at(i int) val {
	if v.k == vStrs {
		return strV(v.strs()[i])
	}
	return v.list()[i]
}

func (v val) kindName() string {
	return [...]string{"null", "bool", "int", "string", "duration", "list", "list", "object", "error", "value"}[v.k]
}

// equal is CEL's ==: values of different kinds are not equal (a value from
// cel-go, vRef, compares as cel-go does: 1 == 1.0).
func equal(a, b val) bool {
	if a.k == vRef || b.k == vRef {
		return toRef(a).Equal(toRef(b)) == types.True
	}
	if a.size() >= 0 && b.size() >= 0 {
		if a.size() != b.size() {
			return false
		}
		for i := range a.size() {
			if !equal(a.at(i), b.at(i)) {
				return false
			}
		}
		return true
	}
	if a.k != b.k {
		return false
	}
	switch a.k {
	case vNull:
		return true
	case vBool:
		return a.b == b.b
	case vInt, vDur:
		return a.i == b.i
	case vStr:
		return a.s == b.s
	case vObj:
		if x, ok := a.o.(entryVal); ok {
			y, ok := b.o.(entryVal)
			return ok && x.e == y.e
		}
		return a.o == b.o
	}
	return false
}

// toVal converts a cel-go value.
func toVal(r ref.Val) val {
	switch x := r.(type) {
	case types.Null:
		return nullV
	case types.Bool:
		return boolV(bool(x))
	case types.Int:
		return intV(int64(x))
	case types.String:
		return strV(string(x))
	case types.Duration:
		return durV(x.Duration)
	case *types.Err:
		return val{k: vErr, o: x}
	case *claimVal, *itemVal, *factsVal, entryVal:
		return val{k: vObj, o: x}
	}
	if l, ok := r.(interface {
		Size() ref.Val
		Get(ref.Val) ref.Val
	}); ok && r.Type() == types.ListType {
		n := int(l.Size().(types.Int))
		out := make([]val, n)
		for i := range n {
			out[i] = toVal(l.Get(types.Int(i)))
		}
		return newList(out)
	}
	return val{k: vRef, o: r}
}

// toRef converts a val to a cel-go value.
func toRef(v val) ref.Val {
	switch v.k {
	case vNull:
		return types.NullValue
	case vBool:
		return types.Bool(v.b)
	case vInt:
		return types.Int(v.i)
	case vStr:
		return types.String(v.s)
	case vDur:
		return types.Duration{Duration: time.Duration(v.i)}
	case vStrs:
		return types.NewStringList(types.DefaultTypeAdapter, v.strs())
	case vList:
		l := v.list()
		out := make([]ref.Val, len(l))
		for i, x := range l {
			out[i] = toRef(x)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, out)
	case vObj:
		return v.o.(ref.Val)
	case vErr:
		if e, ok := v.o.(*types.Err); ok {
			return e
		}
		return types.WrapErr(v.o.(error))
	case vRef:
		return v.o.(ref.Val)
	}
	return types.NullValue
}

// node is a planned expression.
type node func(f *frame) val

// frame is the state of one planned evaluation: the engine's state and the
// comprehension variables.
type frame struct {
	st   *evalState
	vars []val
	// scratch[slot] is the memory a comprehension that is not inside another
	// one builds its list in: its result lives until the expression runs again
	// (a let's, until the next claim), and the rules copy what they keep.
	scratch [][]val
}

// planner plans the expressions of one rule.
type planner struct {
	lets  []letRef       // the rule's lets, visible to the expression
	vars  map[string]int // comprehension variables in scope -> slot
	nvars int            // slots used
	// nscratch counts the scratch lists of the expression's comprehensions.
	nscratch int
	// accu is the accumulator of the innermost comprehension being planned
	// ("" outside one); depth counts the comprehensions around.
	accu  string
	depth int
	fail  error // the first construct the planner does not take
}

var errUnplanned = errors.New("not planned")

// plan returns the expression as a node, or false when it uses a construct the
// planner does not take (it then runs as a cel-go program).
func plan(a *cel.Ast, lets []letRef) (node, frame, bool) {
	p := &planner{lets: lets, vars: map[string]int{}}
	n := p.expr(a.NativeRep().Expr())
	if p.fail != nil {
		return nil, frame{}, false
	}
	return n, frame{vars: make([]val, p.nvars), scratch: make([][]val, p.nscratch)}, true
}

// isEmptyList reports the literal [].
func isEmptyList(e celast.Expr) bool {
	return e.Kind() == celast.ListKind && len(e.AsList().Elements()) == 0
}

func (p *planner) unplanned() node {
	p.fail = errUnplanned
	return func(*frame) val { return nullV }
}

func (p *planner) expr(e celast.Expr) node {
	switch e.Kind() {
	case celast.LiteralKind:
		v := toVal(e.AsLiteral())
		if v.k == vErr {
			return p.unplanned()
		}
		return func(*frame) val { return v }
	case celast.IdentKind:
		return p.ident(e.AsIdent())
	case celast.SelectKind:
		return p.sel(e.AsSelect())
	case celast.ListKind:
		l := e.AsList()
		if len(l.OptionalIndices()) > 0 {
			return p.unplanned()
		}
		elems := make([]node, len(l.Elements()))
		for i, x := range l.Elements() {
			elems[i] = p.expr(x)
		}
		return func(f *frame) val {
			out := make([]val, len(elems))
			for i, n := range elems {
				v := n(f)
				if v.k == vErr {
					return v
				}
				out[i] = v
			}
			return newList(out)
		}
	case celast.CallKind:
		return p.call(e.AsCall())
	case celast.ComprehensionKind:
		return p.comprehension(e.AsComprehension())
	}
	return p.unplanned()
}

// shadowed reports a name a comprehension variable or a let hides.
func (p *planner) shadowed(name string) bool {
	if _, ok := p.vars[name]; ok {
		return true
	}
	for _, l := range p.lets {
		if l.name == name {
			return true
		}
	}
	return false
}

func (p *planner) ident(name string) node {
	if slot, ok := p.vars[name]; ok {
		return func(f *frame) val { return f.vars[slot] }
	}
	switch name {
	case knowledge.RuleVarClaim:
		return func(f *frame) val {
			if f.st.claim == nil {
				return nullV
			}
			return val{k: vObj, o: f.st.claim}
		}
	case knowledge.RuleVarItem:
		return func(f *frame) val {
			if f.st.item == nil {
				return nullV
			}
			return val{k: vObj, o: f.st.item}
		}
	case knowledge.RuleVarFacts:
		return func(f *frame) val { return val{k: vObj, o: &f.st.facts} }
	}
	for _, l := range p.lets {
		if l.name == name {
			slot := l.slot
			return func(f *frame) val {
				st := f.st
				if st.letGen[slot] == st.gen {
					return st.letVals[slot]
				}
				return st.letVal(l)
			}
		}
	}
	return p.unplanned()
}

func (p *planner) sel(s celast.SelectExpr) node {
	name := s.FieldName()
	cf := fieldOf(name)
	nameV := types.String(name)
	// claim.x and item.x read the field directly.
	if o := s.Operand(); o.Kind() == celast.IdentKind && !p.shadowed(o.AsIdent()) {
		switch o.AsIdent() {
		case knowledge.RuleVarClaim:
			if s.IsTestOnly() {
				return func(f *frame) val { return boolV(f.st.claim.has(cf)) }
			}
			return func(f *frame) val { return f.st.claim.fieldVal(cf) }
		case knowledge.RuleVarFacts:
			if !s.IsTestOnly() {
				switch name {
				case "present":
					return func(f *frame) val { return boolV(f.st.facts.present) }
				case "end":
					return func(f *frame) val { return durV(f.st.facts.end) }
				case "tolerance":
					return func(f *frame) val { return durV(f.st.facts.tol) }
				}
			}
		case knowledge.RuleVarItem:
			fi := itemFieldOf(name)
			if s.IsTestOnly() {
				return func(f *frame) val {
					if f.st.item == nil {
						return errV("item is null outside evidence rules")
					}
					return boolV(f.st.item.IsSet(nameV) == types.True)
				}
			}
			return func(f *frame) val {
				if f.st.item == nil {
					return errV("item is null outside evidence rules")
				}
				return f.st.item.fieldVal(fi)
			}
		}
	}
	op := p.expr(s.Operand())
	fi := itemFieldOf(name)
	if s.IsTestOnly() {
		return func(f *frame) val {
			v := op(f)
			switch o := v.o.(type) {
			case *claimVal:
				return boolV(o.has(cf))
			case *itemVal:
				return boolV(o.IsSet(nameV) == types.True)
			case *factsVal:
				return boolV(o.IsSet(nameV) == types.True)
			case entryVal:
				return boolV(o.IsSet(nameV) == types.True)
			case traits.Mapper: // a value from a program or a record (a map)
				_, found := o.Find(nameV)
				return boolV(found)
			}
			if v.k == vErr {
				return v
			}
			return errV("no field %s in a %s", name, v.kindName())
		}
	}
	return func(f *frame) val {
		v := op(f)
		switch o := v.o.(type) {
		case *claimVal:
			return o.fieldVal(cf)
		case *itemVal:
			return o.fieldVal(fi)
		case *factsVal:
			switch name {
			case "present":
				return boolV(o.present)
			case "end":
				return durV(o.end)
			case "tolerance":
				return durV(o.tol)
			}
		case entryVal:
			return toVal(o.Get(nameV))
		case traits.Indexer: // a value from a program (a map)
			return toVal(o.Get(nameV))
		}
		if v.k == vErr {
			return v
		}
		return errV("no field %s in a %s", name, v.kindName())
	}
}

func (p *planner) comprehension(c celast.ComprehensionExpr) node {
	if c.HasIterVar2() {
		return p.unplanned()
	}
	rng := p.expr(c.IterRange())
	init := p.expr(c.AccuInit())
	iv, av := p.nvars, p.nvars+1
	p.nvars += 2
	outerIter, hadIter := p.vars[c.IterVar()]
	outerAccu, hadAccu := p.vars[c.AccuVar()]
	outer := p.accu
	p.vars[c.IterVar()], p.vars[c.AccuVar()] = iv, av
	p.accu = c.AccuVar()
	p.depth++
	cond := p.expr(c.LoopCondition())
	step := p.expr(c.LoopStep())
	macro, body := macroShape(c)
	var bodyN node
	if macro != macroNone {
		bodyN = p.expr(body) // the predicate (or map's element) alone, for the fused loop
	}
	p.depth--
	p.accu = outer
	delete(p.vars, c.IterVar()) // the result sees only the accumulator
	result := p.expr(c.Result())
	restore := func(name string, slot int, had bool) {
		if had {
			p.vars[name] = slot
		} else {
			delete(p.vars, name)
		}
	}
	restore(c.IterVar(), outerIter, hadIter)
	restore(c.AccuVar(), outerAccu, hadAccu)
	// A list built from [] (filter, map) outside any other comprehension is
	// built in the frame's scratch memory.
	scratch := -1
	if p.depth == 0 && isEmptyList(c.AccuInit()) {
		scratch = p.nscratch
		p.nscratch++
	}
	if macro != macroNone {
		return fusedMacro(macro, rng, bodyN, iv, scratch)
	}
	return func(f *frame) val {
		r := rng(f)
		n := r.size()
		if n < 0 {
			if r.k == vErr {
				return r
			}
			return errV("cannot iterate over a %s", r.kindName())
		}
		if scratch >= 0 {
			f.scratch[scratch] = f.scratch[scratch][:0]
			f.vars[av] = listV(&f.scratch[scratch])
		} else {
			f.vars[av] = init(f)
		}
		for i := range n {
			f.vars[iv] = r.at(i)
			if c := cond(f); c.k == vBool && !c.b {
				break
			}
			f.vars[av] = step(f)
		}
		return result(f)
	}
}

// chain plans the terms of a chain of one operator (a && b && c) as one list.
func (p *planner) chain(fn string, args []celast.Expr) []node {
	var out []node
	for _, a := range args {
		if a.Kind() == celast.CallKind && a.AsCall().FunctionName() == fn && !a.AsCall().IsMemberFunction() {
			out = append(out, p.chain(fn, a.AsCall().Args())...)
			continue
		}
		out = append(out, p.expr(a))
	}
	return out
}

// literal returns the value of a literal expression.
func literal(e celast.Expr) (val, bool) {
	if e.Kind() != celast.LiteralKind {
		return val{}, false
	}
	v := toVal(e.AsLiteral())
	return v, v.k != vErr
}

func (p *planner) call(c celast.CallExpr) node {
	args := c.Args()
	if c.IsMemberFunction() {
		args = append([]celast.Expr{c.Target()}, args...)
	}
	n := make([]node, len(args))
	for i, a := range args {
		n[i] = p.expr(a)
	}
	fn := c.FunctionName()
	// Comparisons with a literal, the most frequent conditions, compare in
	// place: x == null, x != "", size(l) > 0...
	if len(args) == 2 && (fn == "_==_" || fn == "_!=_") {
		lit, ok := literal(args[1])
		other := n[0]
		if !ok {
			lit, ok = literal(args[0])
			other = n[1]
		}
		if ok {
			ne := fn == "_!=_"
			switch lit.k {
			case vNull:
				return func(f *frame) val {
					x := other(f)
					if x.k == vErr {
						return x
					}
					return boolV((x.k == vNull) != ne)
				}
			case vStr:
				return func(f *frame) val {
					x := other(f)
					if x.k == vErr {
						return x
					}
					return boolV((x.k == vStr && x.s == lit.s) != ne)
				}
			case vInt, vBool:
				return func(f *frame) val {
					x := other(f)
					if x.k == vErr {
						return x
					}
					return boolV(equal(x, lit) != ne)
				}
			}
		}
	}
	if len(args) == 2 && (fn == "_<_" || fn == "_<=_" || fn == "_>_" || fn == "_>=_") {
		if lit, ok := literal(args[1]); ok && lit.k == vInt && args[0].Kind() == celast.CallKind &&
			args[0].AsCall().FunctionName() == "size" && len(args[0].AsCall().Args()) == 1 && !args[0].AsCall().IsMemberFunction() {
			inner := p.expr(args[0].AsCall().Args()[0])
			k := lit.i
			return func(f *frame) val {
				x := inner(f)
				sz := int64(x.size())
				if sz < 0 {
					if x.k == vErr {
						return x
					}
					if x.k != vStr {
						return errV("no such overload: size(%s)", x.kindName())
					}
					sz = int64(utf8.RuneCountInString(x.s))
				}
				switch fn {
				case "_<_":
					return boolV(sz < k)
				case "_<=_":
					return boolV(sz <= k)
				case "_>_":
					return boolV(sz > k)
				}
				return boolV(sz >= k)
			}
		}
	}
	switch fn {
	case "_&&_", "_||_":
		// A chain a && b && c... runs as one loop: the first false (true for ||)
		// decides; else the first error; else true (false).
		and := fn == "_&&_"
		terms := p.chain(fn, args)
		return func(f *frame) val {
			var bad val
			for _, t := range terms {
				x := t(f)
				if x.k == vBool {
					if x.b != and {
						return x
					}
					continue
				}
				if bad.k != vErr {
					bad = boolErr(x)
				}
			}
			if bad.k == vErr {
				return bad
			}
			return boolV(and)
		}
	case "_?_:_":
		cond, a, b := n[0], n[1], n[2]
		return func(f *frame) val {
			c := cond(f)
			if c.k != vBool {
				return boolErr(c)
			}
			if c.b {
				return a(f)
			}
			return b(f)
		}
	case "!_":
		if a := args[0]; a.Kind() == celast.CallKind && !a.AsCall().IsMemberFunction() {
			// !f(x, "lit") with f a rule function: one closure.
			if impl, ok := natives[a.AsCall().FunctionName()]; ok && len(a.AsCall().Args()) == impl.arity {
				fa := a.AsCall().Args()
				x := p.expr(fa[0])
				var y node
				lit, isLit := val{}, false
				if impl.arity == 2 {
					lit, isLit = literal(fa[1])
					y = p.expr(fa[1])
				}
				return func(f *frame) val {
					xv := x(f)
					if xv.k == vErr {
						return xv
					}
					yv := nullV
					if impl.arity == 2 {
						if isLit {
							yv = lit
						} else if yv = y(f); yv.k == vErr {
							return yv
						}
					}
					r := impl.fn(f.st, xv, yv)
					if r.k != vBool {
						return boolErr(r)
					}
					return boolV(!r.b)
				}
			}
		}
		return unary(n[0], func(x val) val {
			if x.k != vBool {
				return boolErr(x)
			}
			return boolV(!x.b)
		})
	case "@not_strictly_false":
		return unary(n[0], func(x val) val { return boolV(x.k != vBool || x.b) })
	case "_==_", "_!=_":
		ne := fn == "_!=_"
		return binary(n[0], n[1], func(x, y val) val { return boolV(equal(x, y) != ne) })
	case "_<_", "_<=_", "_>_", "_>=_":
		return binary(n[0], n[1], func(x, y val) val {
			c, ok := compare(x, y)
			if !ok {
				return errV("no such overload: %s %s %s", x.kindName(), fn, y.kindName())
			}
			switch fn {
			case "_<_":
				return boolV(c < 0)
			case "_<=_":
				return boolV(c <= 0)
			case "_>_":
				return boolV(c > 0)
			}
			return boolV(c >= 0)
		})
	case "_+_":
		if p.accu != "" && args[0].Kind() == celast.IdentKind && args[0].AsIdent() == p.accu &&
			args[1].Kind() == celast.ListKind && len(args[1].AsList().Elements()) == 1 && len(args[1].AsList().OptionalIndices()) == 0 {
			// A comprehension's step accu + [x] (filter, map): the accumulator is
			// the comprehension's own, so x is appended in place.
			av := p.vars[p.accu]
			elem := p.expr(args[1].AsList().Elements()[0])
			return func(f *frame) val {
				acc := f.vars[av]
				x := elem(f)
				if x.k == vErr {
					return x
				}
				p, ok := acc.o.(*[]val)
				if acc.k != vList || !ok {
					return add(acc, newList([]val{x}))
				}
				*p = append(*p, x)
				return acc
			}
		}
		return binary(n[0], n[1], add)
	case "_-_":
		return binary(n[0], n[1], func(x, y val) val {
			if x.k == y.k && (x.k == vInt || x.k == vDur) {
				return val{k: x.k, i: x.i - y.i}
			}
			if x.k == vRef || y.k == vRef {
				return refOp(x, y, "-")
			}
			return errV("no such overload: %s - %s", x.kindName(), y.kindName())
		})
	case "@in":
		return binary(n[0], n[1], func(x, l val) val {
			if l.k == vStrs && x.k == vStr {
				for _, s := range l.strs() {
					if s == x.s {
						return trueV
					}
				}
				return falseV
			}
			if l.k == vRef {
				if c, ok := l.o.(traits.Container); ok {
					return toVal(c.Contains(toRef(x)))
				}
			}
			if l.size() < 0 {
				return errV("no such overload: %s in %s", x.kindName(), l.kindName())
			}
			for i := range l.size() {
				if equal(x, l.at(i)) {
					return trueV
				}
			}
			return falseV
		})
	case "_[_]":
		return binary(n[0], n[1], func(l, i val) val {
			if l.k == vRef {
				if x, ok := l.o.(traits.Indexer); ok {
					return toVal(x.Get(toRef(i)))
				}
			}
			if l.size() < 0 || i.k != vInt {
				return errV("no such overload: %s[%s]", l.kindName(), i.kindName())
			}
			if i.i < 0 || i.i >= int64(l.size()) {
				return errV("index out of range: %d", i.i)
			}
			return l.at(int(i.i))
		})
	case "size":
		if len(n) != 1 {
			return p.unplanned()
		}
		return unary(n[0], func(x val) val {
			if s := x.size(); s >= 0 {
				return intV(int64(s))
			}
			if x.k == vStr {
				return intV(int64(utf8.RuneCountInString(x.s)))
			}
			if x.k == vRef {
				if s, ok := x.o.(traits.Sizer); ok {
					return toVal(s.Size())
				}
			}
			return errV("no such overload: size(%s)", x.kindName())
		})
	case "string":
		return unary(n[0], func(x val) val {
			switch x.k {
			case vStr:
				return x
			case vInt:
				return strV(strconv.FormatInt(x.i, 10))
			case vBool:
				return strV(strconv.FormatBool(x.b))
			case vRef:
				return toVal(x.o.(ref.Val).ConvertToType(types.StringType))
			}
			return errV("no such overload: string(%s)", x.kindName())
		})
	}
	impl, ok := natives[fn]
	if !ok || c.IsMemberFunction() || len(n) != impl.arity {
		return p.unplanned()
	}
	switch impl.arity {
	case 1:
		a := n[0]
		return func(f *frame) val {
			x := a(f)
			if x.k == vErr {
				return x
			}
			return impl.fn(f.st, x, nullV)
		}
	case 2:
		a, b := n[0], n[1]
		if y, ok := literal(args[1]); ok {
			return func(f *frame) val {
				x := a(f)
				if x.k == vErr {
					return x
				}
				return impl.fn(f.st, x, y)
			}
		}
		return func(f *frame) val {
			x := a(f)
			if x.k == vErr {
				return x
			}
			y := b(f)
			if y.k == vErr {
				return y
			}
			return impl.fn(f.st, x, y)
		}
	}
	return p.unplanned()
}

func boolErr(x val) val {
	if x.k == vErr {
		return x
	}
	return errV("no such overload: want a bool, got a %s", x.kindName())
}

func unary(a node, op func(val) val) node {
	return func(f *frame) val {
		x := a(f)
		if x.k == vErr {
			return x
		}
		return op(x)
	}
}

func binary(a, b node, op func(val, val) val) node {
	return func(f *frame) val {
		x := a(f)
		if x.k == vErr {
			return x
		}
		y := b(f)
		if y.k == vErr {
			return y
		}
		return op(x, y)
	}
}

// compare orders two ints, durations or strings, or two values cel-go orders
// (doubles, timestamps, a double and an int).
func compare(x, y val) (int, bool) {
	if x.k == vRef || y.k == vRef {
		c, ok := toRef(x).(traits.Comparer)
		if !ok {
			return 0, false
		}
		r, ok := c.Compare(toRef(y)).(types.Int)
		return int(r), ok
	}
	if x.k != y.k {
		return 0, false
	}
	switch x.k {
	case vInt, vDur:
		switch {
		case x.i < y.i:
			return -1, true
		case x.i > y.i:
			return 1, true
		}
		return 0, true
	case vStr:
		switch {
		case x.s < y.s:
			return -1, true
		case x.s > y.s:
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// add is CEL's +: ints, durations, strings, lists (and what cel-go adds).
func add(x, y val) val {
	if x.k == vRef || y.k == vRef {
		return refOp(x, y, "+")
	}
	if x.size() >= 0 && y.size() >= 0 {
		out := make([]val, 0, x.size()+y.size())
		for i := range x.size() {
			out = append(out, x.at(i))
		}
		for i := range y.size() {
			out = append(out, y.at(i))
		}
		return newList(out)
	}
	if x.k == y.k {
		switch x.k {
		case vInt, vDur:
			return val{k: x.k, i: x.i + y.i}
		case vStr:
			return strV(x.s + y.s)
		}
	}
	return errV("no such overload: %s + %s", x.kindName(), y.kindName())
}

// refOp applies cel-go's + or - to values of which one is cel-go's own (a
// double, a timestamp).
func refOp(x, y val, op string) val {
	a, b := toRef(x), toRef(y)
	var r ref.Val
	switch op {
	case "+":
		t, ok := a.(traits.Adder)
		if !ok {
			return errV("no such overload: %s + %s", x.kindName(), y.kindName())
		}
		r = t.Add(b)
	default:
		t, ok := a.(traits.Subtractor)
		if !ok {
			return errV("no such overload: %s - %s", x.kindName(), y.kindName())
		}
		r = t.Subtract(b)
	}
	return toVal(r)
}

// The macros' comprehensions the planner runs as one loop each, without the
// accumulator's closures: filter, map, exists and all.
const (
	macroNone = iota
	macroFilter
	macroMap
	macroExists
	macroAll
)

// macroShape recognises the comprehension a macro expands to (cel-go's
// parser): l.filter(x, p), l.map(x, e), l.exists(x, p) and l.all(x, p); it
// returns the macro and p (or e).
func macroShape(c celast.ComprehensionExpr) (int, celast.Expr) {
	accu, iter := c.AccuVar(), c.IterVar()
	isIdent := func(e celast.Expr, name string) bool {
		return e.Kind() == celast.IdentKind && e.AsIdent() == name
	}
	isCall := func(e celast.Expr, fn string, n int) (celast.CallExpr, bool) {
		if e.Kind() != celast.CallKind {
			return nil, false
		}
		call := e.AsCall()
		return call, call.FunctionName() == fn && !call.IsMemberFunction() && len(call.Args()) == n
	}
	isBool := func(e celast.Expr, b bool) bool {
		v, ok := literal(e)
		return ok && v.k == vBool && v.b == b
	}
	// accu + [e]: e, ok
	appended := func(e celast.Expr) (celast.Expr, bool) {
		call, ok := isCall(e, "_+_", 2)
		if !ok || !isIdent(call.Args()[0], accu) || call.Args()[1].Kind() != celast.ListKind {
			return nil, false
		}
		l := call.Args()[1].AsList()
		if len(l.Elements()) != 1 || len(l.OptionalIndices()) > 0 {
			return nil, false
		}
		return l.Elements()[0], true
	}
	if !isIdent(c.Result(), accu) {
		return macroNone, nil
	}
	step := c.LoopStep()
	if isEmptyList(c.AccuInit()) && isBool(c.LoopCondition(), true) {
		if call, ok := isCall(step, "_?_:_", 3); ok && isIdent(call.Args()[2], accu) {
			if x, ok := appended(call.Args()[1]); ok && isIdent(x, iter) {
				return macroFilter, call.Args()[0]
			}
		}
		if x, ok := appended(step); ok {
			return macroMap, x
		}
		return macroNone, nil
	}
	cond, ok := isCall(c.LoopCondition(), "@not_strictly_false", 1)
	if !ok {
		return macroNone, nil
	}
	if isBool(c.AccuInit(), false) {
		not, ok := isCall(cond.Args()[0], "!_", 1)
		if st, ok2 := isCall(step, "_||_", 2); ok && ok2 && isIdent(not.Args()[0], accu) && isIdent(st.Args()[0], accu) {
			return macroExists, st.Args()[1]
		}
	}
	if isBool(c.AccuInit(), true) && isIdent(cond.Args()[0], accu) {
		if st, ok := isCall(step, "_&&_", 2); ok && isIdent(st.Args()[0], accu) {
			return macroAll, st.Args()[1]
		}
	}
	return macroNone, nil
}

// fusedMacro runs a macro's comprehension as one loop: body is the predicate
// (the element, for map) with the element in vars[iv]. A list is built in the
// frame's scratch slot when there is one. The first error (a non-bool
// predicate) is the result, as cel-go's comprehension gives, except where
// exists (all) meets a true (false) element, which decides.
func fusedMacro(macro int, rng, body node, iv, scratch int) node {
	return func(f *frame) val {
		r := rng(f)
		n := r.size()
		if n < 0 {
			if r.k == vErr {
				return r
			}
			return errV("cannot iterate over a %s", r.kindName())
		}
		switch macro {
		case macroExists, macroAll:
			decide := macro == macroExists // the element value that decides
			var bad val
			for i := range n {
				f.vars[iv] = r.at(i)
				v := body(f)
				if v.k == vBool {
					if v.b == decide {
						return v
					}
					continue
				}
				if bad.k != vErr {
					bad = boolErr(v)
				}
			}
			if bad.k == vErr {
				return bad
			}
			return boolV(!decide)
		}
		var out *[]val
		if scratch >= 0 {
			out = &f.scratch[scratch]
			*out = (*out)[:0]
		} else {
			out = new([]val)
		}
		for i := range n {
			x := r.at(i)
			f.vars[iv] = x
			v := body(f)
			if macro == macroMap {
				if v.k == vErr {
					return v
				}
				*out = append(*out, v)
				continue
			}
			if v.k != vBool {
				return boolErr(v)
			}
			if v.b {
				*out = append(*out, x)
			}
		}
		return listV(out)
	}
}
