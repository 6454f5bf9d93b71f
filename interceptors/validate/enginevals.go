package validate

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
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
	// recMemo holds the records functions' values for the check: set + "\x00" +
	// key (record) or set (records).
	recMemo map[string]val
}

func (st *evalState) reset() {
	st.r, st.claim, st.item = nil, nil, nil
	clear(st.letVals)
	clear(st.recMemo)
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
// (u), an event or timeline claim (c), or a claim of a kind the pack declares
// (rec, read generically; its fields converted once into rf).
type claimVal struct {
	u      *claims.UnitClaim
	c      *claims.Claim
	rec    *claims.Record
	rf     []recField // rec's present fields, in declaration order
	its    []itemVal  // one per evidence item (storage reused claim after claim)
	itemsV []val      // &its[i], as values
	ownV   []val      // unit_items' result (storage reused claim after claim)
	// present has bit 1<<field set for each typed field the claim has.
	present uint16
}

// recField is one present field of a declared kind's claim, as a value.
type recField struct {
	name string
	v    val
}

// fieldNames are the typed fields' names, by field id.
var fieldNames = [...]string{fieldUnitID: "unitId", fieldPlayer: "player", fieldClaimText: "claim",
	fieldLevelRaw: "evidenceLevel", fieldEvidence: "evidence", fieldAlternatives: "alternatives",
	fieldNeeds: "needsConfirmation", fieldPath: "path", fieldLevel: "level"}

// setRecord makes cv the declared kind's claim rec, with its fields (the kind's
// declared fields, in order) as values: a blank string or an empty list is
// absent, so has(claim.x) means "given"; dates are timestamps, numbers
// doubles; evidence is the items' raw strings (the items themselves are the
// evidence rules' `item`); evidenceLevel falls back to the level as written.
func (cv *claimVal) setRecord(rec *claims.Record, fields []string, st *evalState) {
	cv.set(nil, nil, st)
	cv.rec = rec
	cv.rf = cv.rf[:0]
	for i := range rec.Evidence {
		cv.its = append(cv.its, itemVal{ev: &rec.Evidence[i], st: st})
	}
	for i := range cv.its {
		cv.itemsV = append(cv.itemsV, val{k: vObj, o: &cv.its[i]})
	}
	hasLevel := false
	for _, name := range fields {
		x, ok := rec.Field(name)
		if !ok {
			continue
		}
		var v val
		switch x := x.(type) {
		case string:
			if x == "" {
				continue
			}
			v = strV(x)
		case int64:
			v = intV(x)
		case float64:
			v = val{k: vRef, o: types.Double(x)}
		case bool:
			v = boolV(x)
		case time.Time:
			v = val{k: vRef, o: types.Timestamp{Time: x}}
		case time.Duration:
			v = durV(x)
		case []string:
			if len(x) == 0 {
				continue
			}
			v = strsV(st.keep(x))
		case []claims.Evidence:
			if len(x) == 0 {
				continue
			}
			raws := make([]string, len(x))
			for i, e := range x {
				raws[i] = e.Raw
			}
			v = strsV(st.keep(raws))
		default:
			v = toVal(types.DefaultTypeAdapter.NativeToValue(x))
		}
		hasLevel = hasLevel || name == "evidenceLevel"
		cv.rf = append(cv.rf, recField{name, v})
	}
	if !hasLevel && rec.LevelRaw != "" {
		cv.rf = append(cv.rf, recField{"evidenceLevel", strV(rec.LevelRaw)})
	}
	for f := fieldUnitID; f <= fieldLevel; f++ {
		if cv.has(claimField{id: f}) {
			cv.present |= 1 << f
		}
	}
}

// recVal returns a declared kind's field by name.
func (cv *claimVal) recVal(f claimField) (val, bool) {
	name := f.name
	if name == "" {
		name = fieldNames[f.id]
	}
	for i := range cv.rf {
		if cv.rf[i].name == name {
			return cv.rf[i].v, true
		}
	}
	switch name {
	case "path":
		return strV(cv.rec.Path), true
	case "level":
		return strV(cv.rec.Level.String()), true
	}
	return val{}, false
}

// set makes cv the claim u or c, with its evidence items.
func (cv *claimVal) set(u *claims.UnitClaim, c *claims.Claim, st *evalState) {
	cv.u, cv.c, cv.rec = u, c, nil
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

// unitItems is unit_items(claim): the evidence items the facts confirm
// (verified) whose unit parameter equals the claim's unitId — what
// claim.evidence.filter(e, e.verified && item_unit(e) == claim.unitId) gives,
// in one loop.
func (cv *claimVal) unitItems() val {
	cv.ownV = cv.ownV[:0]
	var unit val
	read := false
	for i := range cv.its {
		it := &cv.its[i]
		if !it.verified {
			continue
		}
		if !read {
			if unit, read = cv.fieldVal(claimField{id: fieldUnitID, name: "unitId"}), true; unit.k == vErr {
				return unit
			}
		}
		if equal(it.unitVal(), unit) {
			cv.ownV = append(cv.ownV, cv.itemsV[i])
		}
	}
	return listV(&cv.ownV)
}

// unitVal is item_unit(item): the item's unit parameter as an int, or null.
func (it *itemVal) unitVal() val {
	fields, _ := it.kind().EvidenceFields()
	if id, ok := unitParam(it.ev, fields); ok {
		return intV(id)
	}
	return nullV
}

func (cv *claimVal) path() string {
	if cv.u != nil {
		return cv.u.Path
	}
	if cv.rec != nil {
		return cv.rec.Path
	}
	return cv.c.Path
}

func (cv *claimVal) level() claims.Level {
	if cv.u != nil {
		return cv.u.Level
	}
	if cv.rec != nil {
		return cv.rec.Level
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
	if cv.rec != nil {
		_, ok := cv.recVal(f)
		return ok
	}
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
	if cv.rec != nil {
		if v, ok := cv.recVal(f); ok {
			return v
		}
		return errV("no such key: %s", f.name)
	}
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
	if cv.rec != nil {
		if name == "evidenceLevel" || name == "level" {
			return cv.rec.LevelRaw
		}
		return cv.rec.FieldText(name)
	}
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
		return it.unitVal()
	})
	two("record", func(st *evalState, set, key val) val { return st.record(set.s, key) })
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
	one("unit_items", func(st *evalState, v val) val {
		cv, ok := v.o.(*claimVal)
		if !ok {
			return errV("unit_items wants a claim, got a %s", v.kindName())
		}
		return cv.unitItems()
	})
	two("mismatched_powers", func(st *evalState, scope, v val) val {
		cv, ok := v.o.(*claimVal)
		if !ok {
			return errV("mismatched_powers wants a claim, got a %s", v.kindName())
		}
		u, ok := unit(st, cv.fieldVal(claimField{id: fieldUnitID, name: "unitId"}))
		if !ok {
			return strsV(noStrings)
		}
		view := st.r.view(scope.s)
		entry := view.Entry(cv.fieldVal(claimField{id: fieldClaimText, name: "claim"}).s)
		mismatched := func(p string) bool {
			var buf powerTagBuf
			tag := buf.tag(p)
			return len(view.AssetsWithTag(tag)) > 0 && (entry == nil || !entry.HasTag(tag))
		}
		powers := u.Powers()
		n := 0
		for _, p := range powers {
			if mismatched(p) {
				n++
			}
		}
		if n == len(powers) {
			return strsV(st.keep(powers))
		}
		out := make([]string, 0, n)
		for _, p := range powers {
			if mismatched(p) {
				out = append(out, p)
			}
		}
		return strsV(st.keep(out))
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

// record answers record(set, key): the record of set whose key is key, as a
// CEL map of its fields, or null. Each record converts once per check.
func (st *evalState) record(set string, key val) val {
	k := keyText(key)
	if st.r == nil || st.r.ix.RecordCount() == 0 {
		return nullV
	}
	mk := set + "\x00" + k
	if v, ok := st.recMemo[mk]; ok {
		return v
	}
	v := nullV
	if r, ok := st.r.ix.Record(set, k); ok {
		v = val{k: vRef, o: types.DefaultTypeAdapter.NativeToValue(r.Map())}
	}
	if st.recMemo == nil {
		st.recMemo = map[string]val{}
	}
	st.recMemo[mk] = v
	return v
}

// records answers records(set): every record of set, in order, as maps.
func (st *evalState) records(set string) val {
	if st.r == nil || st.r.ix.RecordCount() == 0 {
		return newList(nil)
	}
	if v, ok := st.recMemo[set]; ok {
		return v
	}
	recs := st.r.ix.Records(set)
	out := make([]val, len(recs))
	for i, r := range recs {
		out[i] = val{k: vRef, o: types.DefaultTypeAdapter.NativeToValue(r.Map())}
	}
	v := newList(out)
	if st.recMemo == nil {
		st.recMemo = map[string]val{}
	}
	st.recMemo[set] = v
	return v
}

// keyText is a record key given as a string, an int or another value.
func keyText(v val) string {
	switch v.k {
	case vStr:
		return v.s
	case vInt:
		return strconv.FormatInt(v.i, 10)
	case vRef:
		return fmt.Sprint(v.o.(ref.Val).Value())
	}
	return ""
}

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
