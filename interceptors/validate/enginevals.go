package validate

import (
	"errors"
	"reflect"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/knowledge"
)

// evalState is what one instance's bound functions and activation read: the run
// (facts, knowledge, players) and the claim and item being checked.
type evalState struct {
	r     *run
	claim *claimVal
	item  *itemVal
	facts factsVal
	act   activation
	in    *instance
	// letVals[slot] is the let's value for the current claim (or item) when
	// letGen[slot] == gen.
	letVals []val
	letGen  []uint32
	gen     uint32
	// strs is the check's arena of list headers (keep); its capacity is fixed.
	strs [][]string
}

func (st *evalState) reset() {
	st.r, st.claim, st.item = nil, nil, nil
	clear(st.letVals)
	clear(st.strs)
	st.strs = st.strs[:0]
}

// let returns the let's value, computing it on first use for the current claim
// (or item): a let no rule reads is never computed, and one that several rules
// declare alike is computed once.
func (st *evalState) letVal(l letRef) val {
	if st.letGen[l.slot] == st.gen {
		return st.letVals[l.slot]
	}
	v := st.in.value(l.expr)
	st.letVals[l.slot], st.letGen[l.slot] = v, st.gen
	return v
}

// activation resolves the rule language's variables without allocating.
type activation struct {
	st   *evalState
	lets []letRef // the current rule's
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case knowledge.RuleVarClaim:
		if a.st.claim == nil {
			return types.NullValue, true
		}
		return a.st.claim, true
	case knowledge.RuleVarItem:
		if a.st.item == nil {
			return types.NullValue, true
		}
		return a.st.item, true
	case knowledge.RuleVarFacts:
		return &a.st.facts, true
	}
	for _, l := range a.lets {
		if l.name == name {
			return toRef(a.st.letVal(l)), true
		}
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

var (
	claimType = types.NewObjectType("factgate.Claim", traits.IndexerType|traits.FieldTesterType)
	itemType  = types.NewObjectType("factgate.EvidenceItem", traits.IndexerType|traits.FieldTesterType)
	factsType = types.NewObjectType("factgate.Facts", traits.IndexerType|traits.FieldTesterType)
	entryType = types.NewObjectType("factgate.Entry", traits.IndexerType|traits.FieldTesterType)
)

var errNoConversion = errors.New("no conversion")

// The fields of a typed claim (ra3's unitClaims, eventClaims, timelineClaims).
const (
	fieldOther = iota
	fieldUnitID
	fieldPlayer
	fieldClaimText
	fieldLevelRaw
	fieldEvidence
	fieldAlternatives
	fieldNeeds
	fieldPath
	fieldLevel
)

// claimField is a field name, resolved once to its typed field.
type claimField struct {
	id   int
	name string
}

func fieldOf(name string) claimField {
	id := fieldOther
	switch name {
	case "unitId":
		id = fieldUnitID
	case "player":
		id = fieldPlayer
	case "claim":
		id = fieldClaimText
	case "evidenceLevel":
		id = fieldLevelRaw
	case "evidence":
		id = fieldEvidence
	case "alternatives":
		id = fieldAlternatives
	case "needsConfirmation":
		id = fieldNeeds
	case "path":
		id = fieldPath
	case "level":
		id = fieldLevel
	}
	return claimField{id: id, name: name}
}

// claimVal is a claim as a CEL value over the parsed claim itself: a unit claim
// (u) or an event or timeline claim (c).
type claimVal struct {
	u      *claims.UnitClaim
	c      *claims.Claim
	its    []itemVal // one per evidence item (storage reused claim after claim)
	itemsV []val     // &its[i], as values
	// present has bit 1<<field set for each typed field the claim has.
	present uint16
}

// set makes cv the claim u or c, with its evidence items.
func (cv *claimVal) set(u *claims.UnitClaim, c *claims.Claim, st *evalState) {
	cv.u, cv.c = u, c
	evs := cv.evidence()
	cv.its = cv.its[:0]
	for i := range evs {
		cv.its = append(cv.its, itemVal{ev: &evs[i], st: st})
	}
	cv.itemsV = cv.itemsV[:0]
	for i := range cv.its {
		cv.itemsV = append(cv.itemsV, val{k: vObj, o: &cv.its[i]})
	}
	cv.present = 0
	if u == nil && c == nil {
		return
	}
	for f := fieldUnitID; f <= fieldLevel; f++ {
		if cv.has(claimField{id: f}) {
			cv.present |= 1 << f
		}
	}
}

func (cv *claimVal) path() string {
	if cv.u != nil {
		return cv.u.Path
	}
	return cv.c.Path
}

func (cv *claimVal) level() claims.Level {
	if cv.u != nil {
		return cv.u.Level
	}
	return cv.c.Level
}

func (cv *claimVal) evidence() []claims.Evidence {
	switch {
	case cv.u != nil:
		return cv.u.Evidence
	case cv.c != nil:
		return cv.c.Evidence
	}
	return nil
}

func (cv *claimVal) has(f claimField) bool {
	u, c := cv.u, cv.c
	switch f.id {
	case fieldUnitID:
		return u != nil && u.HasUnitID
	case fieldPlayer:
		return u != nil && u.Player != ""
	case fieldClaimText:
		if u != nil {
			return u.Claim != ""
		}
		return c.Claim != ""
	case fieldLevelRaw:
		if u != nil {
			return u.LevelRaw != ""
		}
		return c.LevelRaw != ""
	case fieldEvidence:
		return len(cv.evidence()) > 0
	case fieldAlternatives:
		return u != nil && len(u.Alternatives) > 0
	case fieldNeeds:
		if u != nil {
			return len(u.NeedsConfirmation) > 0
		}
		return len(c.NeedsConfirmation) > 0
	case fieldPath, fieldLevel:
		return true
	}
	return false
}

func (cv *claimVal) fieldVal(f claimField) val {
	u, c := cv.u, cv.c
	switch f.id {
	case fieldUnitID:
		if u != nil && u.HasUnitID {
			return intV(u.UnitID)
		}
		return nullV
	case fieldPlayer:
		if u != nil {
			return strV(u.Player)
		}
		return strV("")
	case fieldClaimText:
		if u != nil {
			return strV(u.Claim)
		}
		return strV(c.Claim)
	case fieldLevelRaw:
		if u != nil {
			return strV(u.LevelRaw)
		}
		return strV(c.LevelRaw)
	case fieldEvidence:
		return listV(&cv.itemsV)
	case fieldAlternatives:
		if u != nil {
			return strsV(&u.Alternatives)
		}
		return strsV(noStrings)
	case fieldNeeds:
		if u != nil {
			return strsV(&u.NeedsConfirmation)
		}
		return strsV(&c.NeedsConfirmation)
	case fieldPath:
		return strV(cv.path())
	case fieldLevel:
		return strV(cv.level().String())
	}
	return errV("no such field %q in the claim", f.name)
}

func (cv *claimVal) field(f claimField) ref.Val { return toRef(cv.fieldVal(f)) }

// written returns a field as the model wrote it.
func (cv *claimVal) written(name string) string {
	f := fieldOf(name)
	switch f.id {
	case fieldUnitID:
		if cv.u != nil {
			return cv.u.UnitIDRaw
		}
		return ""
	case fieldLevelRaw, fieldLevel:
		if cv.u != nil {
			return cv.u.LevelRaw
		}
		return cv.c.LevelRaw
	}
	if v := cv.fieldVal(f); v.k == vStr {
		return v.s
	}
	return ""
}

func fieldName(index ref.Val) (string, bool) {
	s, ok := index.(types.String)
	return string(s), ok
}

// Get implements traits.Indexer.
func (cv *claimVal) Get(index ref.Val) ref.Val {
	name, ok := fieldName(index)
	if !ok {
		return types.NewErr("a claim field is named by a string")
	}
	return cv.field(fieldOf(name))
}

// IsSet implements traits.FieldTester: has(claim.x) is true when x is present and
// not empty.
func (cv *claimVal) IsSet(field ref.Val) ref.Val {
	name, ok := fieldName(field)
	if !ok {
		return types.NewErr("a claim field is named by a string")
	}
	return types.Bool(cv.has(fieldOf(name)))
}

func (cv *claimVal) ConvertToNative(reflect.Type) (any, error) { return nil, errNoConversion }
func (cv *claimVal) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return claimType
	}
	return types.NewErr("no conversion of a claim to %s", t.TypeName())
}
func (cv *claimVal) Equal(o ref.Val) ref.Val { return types.Bool(o == ref.Val(cv)) }
func (cv *claimVal) Type() ref.Type          { return claimType }
func (cv *claimVal) Value() any              { return cv }

// itemVal is an evidence item as a CEL value.
type itemVal struct {
	ev       *claims.Evidence
	st       *evalState
	verified bool
	kindDone bool
	k        facts.Kind
}

// kind returns the facts' kind of the item's type, looked up once.
func (it *itemVal) kind() facts.Kind {
	if !it.kindDone {
		it.k, it.kindDone = it.st.r.ix.Kind(it.ev.Type), true
	}
	return it.k
}

// The fields of an evidence item.
const (
	itemFieldOther = iota
	itemFieldType
	itemTime
	itemParams
	itemRaw
	itemStructured
	itemPath
	itemVerified
)

func itemFieldOf(name string) int {
	switch name {
	case "type":
		return itemFieldType
	case "time":
		return itemTime
	case "params":
		return itemParams
	case "raw":
		return itemRaw
	case "structured":
		return itemStructured
	case "path":
		return itemPath
	case "verified":
		return itemVerified
	}
	return itemFieldOther
}

func (it *itemVal) fieldVal(f int) val {
	ev := it.ev
	switch f {
	case itemFieldType:
		return strV(ev.Type)
	case itemTime:
		return durV(ev.Time)
	case itemParams:
		return strsV(&ev.Params)
	case itemRaw:
		return strV(ev.Raw)
	case itemStructured:
		return boolV(ev.Structured)
	case itemPath:
		return strV(ev.Path)
	case itemVerified:
		return boolV(it.verified)
	}
	return errV("no such field in an evidence item")
}

// Get implements traits.Indexer.
func (it *itemVal) Get(index ref.Val) ref.Val {
	name, _ := fieldName(index)
	return toRef(it.fieldVal(itemFieldOf(name)))
}

// IsSet implements traits.FieldTester.
func (it *itemVal) IsSet(field ref.Val) ref.Val {
	name, _ := fieldName(field)
	switch name {
	case "type", "time", "params":
		return types.Bool(it.ev.Structured)
	case "raw", "structured", "path", "verified":
		return types.True
	}
	return types.False
}

func (it *itemVal) ConvertToNative(reflect.Type) (any, error) { return nil, errNoConversion }
func (it *itemVal) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return itemType
	}
	return types.NewErr("no conversion of an evidence item to %s", t.TypeName())
}
func (it *itemVal) Equal(o ref.Val) ref.Val { return types.Bool(o == ref.Val(it)) }
func (it *itemVal) Type() ref.Type          { return itemType }
func (it *itemVal) Value() any              { return it }

// factsVal is the `facts` variable.
type factsVal struct {
	present  bool
	end, tol time.Duration
}

// Get implements traits.Indexer.
func (f *factsVal) Get(index ref.Val) ref.Val {
	name, _ := fieldName(index)
	switch name {
	case "present":
		return types.Bool(f.present)
	case "end":
		return types.Duration{Duration: f.end}
	case "tolerance":
		return types.Duration{Duration: f.tol}
	}
	return types.NewErr("no such field %q in facts", name)
}

// IsSet implements traits.FieldTester.
func (f *factsVal) IsSet(field ref.Val) ref.Val {
	name, _ := fieldName(field)
	return types.Bool(name == "present" || name == "end" || name == "tolerance")
}

func (f *factsVal) ConvertToNative(reflect.Type) (any, error) { return nil, errNoConversion }
func (f *factsVal) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return factsType
	}
	return types.NewErr("no conversion of facts to %s", t.TypeName())
}
func (f *factsVal) Equal(o ref.Val) ref.Val { return types.Bool(o == ref.Val(f)) }
func (f *factsVal) Type() ref.Type          { return factsType }
func (f *factsVal) Value() any              { return f }

// entryVal is a knowledge entry as a CEL value (id, tags).
type entryVal struct{ e *knowledge.Entry }

// Get implements traits.Indexer.
func (v entryVal) Get(index ref.Val) ref.Val {
	name, _ := fieldName(index)
	switch name {
	case "id":
		return types.String(v.e.ID)
	case "tags":
		return types.NewStringList(types.DefaultTypeAdapter, v.e.Tags)
	}
	return types.NewErr("no such field %q in a knowledge entry", name)
}

// IsSet implements traits.FieldTester.
func (v entryVal) IsSet(field ref.Val) ref.Val {
	name, _ := fieldName(field)
	return types.Bool(name == "id" || (name == "tags" && len(v.e.Tags) > 0))
}

func (v entryVal) ConvertToNative(reflect.Type) (any, error) { return nil, errNoConversion }
func (v entryVal) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return entryType
	}
	return types.NewErr("no conversion of a knowledge entry to %s", t.TypeName())
}
func (v entryVal) Equal(o ref.Val) ref.Val {
	w, ok := o.(entryVal)
	return types.Bool(ok && w.e == v.e)
}
func (v entryVal) Type() ref.Type { return entryType }
func (v entryVal) Value() any     { return v.e }

// levelRank orders the levels: ruled out < uncertain < possible < highly likely
// < confirmed.
func levelRank(l claims.Level) int {
	switch l {
	case claims.RuledOut:
		return 0
	case claims.Uncertain:
		return 1
	case claims.Possible:
		return 2
	case claims.HighlyLikely:
		return 3
	}
	return 4
}

// native is a rule function's implementation over vals (knowledge.RuleFuncs).
type native struct {
	arity int
	fn    func(st *evalState, a, b val) val
}

// natives are the rule functions, by name; the planner calls them directly and
// the cel-go programs through bind.
var natives = map[string]native{}

func init() {
	unit := func(st *evalState, v val) (facts.Unit, bool) {
		if v.k != vInt || !st.r.hasFacts {
			return facts.Unit{}, false
		}
		return st.r.unit(v.i), true
	}
	item := func(v val) (*itemVal, bool) {
		it, ok := v.o.(*itemVal)
		return it, ok
	}
	notItem := func(v val) val { return errV("want an evidence item, got a %s", v.kindName()) }
	evidence := func(it *itemVal) facts.Evidence {
		return facts.Evidence{Type: it.ev.Type, At: it.ev.Time, Params: it.ev.Params}
	}
	one := func(name string, fn func(st *evalState, a val) val) {
		natives[name] = native{1, func(st *evalState, a, _ val) val { return fn(st, a) }}
	}
	two := func(name string, fn func(st *evalState, a, b val) val) { natives[name] = native{2, fn} }

	one("observed", func(st *evalState, v val) val {
		u, ok := unit(st, v)
		return boolV(ok && u.Observed())
	})
	one("owners", func(st *evalState, v val) val {
		u, ok := unit(st, v)
		if !ok {
			return strsV(noStrings)
		}
		return strsV(st.keep(u.Players()))
	})
	one("unit_powers", func(st *evalState, v val) val {
		u, ok := unit(st, v)
		if !ok {
			return strsV(noStrings)
		}
		return strsV(st.keep(u.Powers()))
	})
	two("used_power", func(st *evalState, v, p val) val {
		u, ok := unit(st, v)
		return boolV(ok && u.UsedPower(p.s))
	})
	two("acted_as", func(st *evalState, v, role val) val {
		u, ok := unit(st, v)
		return boolV(ok && u.ActedAs(role.s))
	})
	one("first_seen", func(st *evalState, v val) val {
		u, ok := unit(st, v)
		if !ok {
			return nullV
		}
		return durOrNullV(u.FirstObserved())
	})
	two("first_production", func(st *evalState, player, asset val) val {
		if !st.r.hasFacts {
			return nullV
		}
		return durOrNullV(st.r.ix.FirstProduction(player.s, asset.s))
	})
	one("is_player", func(st *evalState, v val) val { return boolV(st.r.knownPlayer(v.s)) })
	two("has_role", func(st *evalState, kind, role val) val {
		if it, ok := item(kind); ok {
			return boolV(it.kind().HasRole(role.s)) // the item's kind, looked up once
		}
		if kind.k != vStr {
			return errV("has_role wants an evidence item or type, got a %s", kind.kindName())
		}
		return boolV(st.r.ix.Kind(kind.s).HasRole(role.s))
	})
	one("cites", func(st *evalState, v val) val {
		it, ok := item(v)
		if !ok {
			return notItem(v)
		}
		return boolV(it.ev.Structured && it.kind().Matches(evidence(it), st.r.tol))
	})
	one("nearest", func(st *evalState, v val) val {
		it, ok := item(v)
		if !ok {
			return notItem(v)
		}
		if !it.ev.Structured {
			return nullV
		}
		if op, ok := it.kind().Nearest(evidence(it), st.r.tol); ok {
			return strV(op.Text)
		}
		return nullV
	})
	two("item_field", func(st *evalState, v, field val) val {
		it, ok := item(v)
		if !ok {
			return notItem(v)
		}
		fields, _ := it.kind().EvidenceFields()
		return strV(param(it.ev, fields, field.s))
	})
	one("item_unit", func(st *evalState, v val) val {
		it, ok := item(v)
		if !ok {
			return notItem(v)
		}
		fields, _ := it.kind().EvidenceFields()
		if id, ok := unitParam(it.ev, fields); ok {
			return intV(id)
		}
		return nullV
	})
	two("record", func(st *evalState, set, key val) val { return st.record(set.s, key.s) })
	one("records", func(st *evalState, set val) val { return st.records(set.s) })
	one("scope_of", func(st *evalState, v val) val { return strV(st.r.scopeOf(v.s)) })
	one("knows_scope", func(st *evalState, v val) val { return boolV(st.r.view(v.s).Exists()) })
	two("asset", func(st *evalState, scope, name val) val {
		if e := st.r.view(scope.s).Entry(name.s); e != nil {
			return val{k: vObj, o: entryVal{e}}
		}
		return nullV
	})
	two("has_tag", func(st *evalState, e, tag val) val {
		ev, ok := e.o.(entryVal)
		return boolV(ok && ev.e.HasTag(tag.s))
	})
	two("assets_with_tag", func(st *evalState, scope, tag val) val {
		return strsV(st.keep(st.r.view(scope.s).AssetsWithTag(tag.s)))
	})
	two("assets_with_power", func(st *evalState, scope, power val) val {
		var buf powerTagBuf
		return strsV(st.keep(st.r.view(scope.s).AssetsWithTag(buf.tag(power.s))))
	})
	two("power_carriers", func(st *evalState, scope, v val) val {
		it, ok := item(v)
		if !ok {
			return notItem(v)
		}
		fields, _ := it.kind().EvidenceFields()
		power := param(it.ev, fields, "power")
		if power == "" {
			return strsV(noStrings)
		}
		var buf powerTagBuf
		return strsV(st.keep(st.r.view(scope.s).AssetsWithTag(buf.tag(power))))
	})
	two("carries_power", func(st *evalState, e, power val) val {
		ev, ok := e.o.(entryVal)
		var buf powerTagBuf
		return boolV(ok && ev.e.HasTag(buf.tag(power.s)))
	})
	two("any_asset_has_tag", func(st *evalState, name, tag val) val {
		if st.r.set == nil {
			return falseV
		}
		for _, e := range st.r.set.Lookup(name.s) {
			if e.Entry.HasTag(tag.s) {
				return trueV
			}
		}
		return falseV
	})
	two("level_at_least", func(st *evalState, a, b val) val {
		la, oka := claims.ParseLevel(a.s)
		lb, okb := claims.ParseLevel(b.s)
		if !oka || !okb {
			return errV("unknown evidence level %q or %q", a.s, b.s)
		}
		return boolV(levelRank(la) >= levelRank(lb))
	})
	one("clock", func(st *evalState, v val) val {
		if v.k != vDur {
			return errV("clock wants a duration, got a %s", v.kindName())
		}
		return strV(interceptors.FormatClock(time.Duration(v.i)))
	})
	one("listing", func(st *evalState, v val) val {
		s, err := valStrings(v)
		if err != nil {
			return val{k: vErr, o: err}
		}
		return strV(joinList(s, st.r.c.sep))
	})
	two("written", func(st *evalState, v, field val) val {
		cv, ok := v.o.(*claimVal)
		if !ok {
			return errV("written wants a claim, got a %s", v.kindName())
		}
		return strV(cv.written(field.s))
	})
}

func durOrNullV(d time.Duration, ok bool) val {
	if !ok {
		return nullV
	}
	return durV(d)
}

// bind returns the cel-go binding of a rule function's overload over st: its
// native implementation, for the expressions that run as cel-go programs.
func (st *evalState) bind(overload string) cel.OverloadOpt {
	for _, f := range knowledge.RuleFuncs {
		if f.Overload != overload {
			continue
		}
		impl, ok := natives[f.Name]
		if !ok {
			return nil
		}
		switch impl.arity {
		case 1:
			return cel.UnaryBinding(func(a ref.Val) ref.Val { return toRef(impl.fn(st, toVal(a), nullV)) })
		case 2:
			return cel.BinaryBinding(func(a, b ref.Val) ref.Val { return toRef(impl.fn(st, toVal(a), toVal(b))) })
		}
	}
	return nil
}

// record and records answer the records functions; the facts read from JSON
// arrive with the records index (interceptors/facts): until then no set has
// records.
func (st *evalState) record(set, key string) val { return nullV }

func (st *evalState) records(set string) val { return newList(nil) }

// keep returns a pointer to ss for a list value, from the check's arena of
// slice headers (no allocation for the first ones).
func (st *evalState) keep(ss []string) *[]string {
	if len(ss) == 0 {
		return noStrings
	}
	if len(st.strs) < cap(st.strs) {
		st.strs = append(st.strs, ss)
		return &st.strs[len(st.strs)-1]
	}
	p := new([]string) // (not &ss: that would move every call's ss to the heap)
	*p = ss
	return p
}
