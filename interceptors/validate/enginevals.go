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
	progs []cel.Program
	// letVals[slot] is the let's value for the current claim (or item) when
	// letGen[slot] == gen.
	letVals []ref.Val
	letGen  []uint32
	gen     uint32
}

func (st *evalState) reset() {
	st.r, st.claim, st.item = nil, nil, nil
	clear(st.letVals)
}

// let returns the let's value, computing it on first use for the current claim
// (or item): a let no rule reads is never computed, and one that several rules
// declare alike is computed once.
func (st *evalState) let(l letRef) ref.Val {
	if st.letGen[l.slot] == st.gen && st.letVals[l.slot] != nil {
		return st.letVals[l.slot]
	}
	v, _, err := st.progs[l.expr].Eval(&st.act)
	if err != nil {
		v = types.WrapErr(err)
	}
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
			return a.st.let(l), true
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
	u     *claims.UnitClaim
	c     *claims.Claim
	items []ref.Val // *itemVal, one per evidence item
	list  ref.Val   // items as a CEL list, made on first use
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
	if cv.u != nil {
		return cv.u.Evidence
	}
	return cv.c.Evidence
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

func (cv *claimVal) field(f claimField) ref.Val {
	u, c := cv.u, cv.c
	switch f.id {
	case fieldUnitID:
		if u != nil && u.HasUnitID {
			return types.Int(u.UnitID)
		}
		return types.NullValue
	case fieldPlayer:
		if u != nil {
			return types.String(u.Player)
		}
		return types.String("")
	case fieldClaimText:
		if u != nil {
			return types.String(u.Claim)
		}
		return types.String(c.Claim)
	case fieldLevelRaw:
		if u != nil {
			return types.String(u.LevelRaw)
		}
		return types.String(c.LevelRaw)
	case fieldEvidence:
		if cv.list == nil {
			cv.list = types.NewRefValList(types.DefaultTypeAdapter, cv.items)
		}
		return cv.list
	case fieldAlternatives:
		if u != nil {
			return types.NewStringList(types.DefaultTypeAdapter, u.Alternatives)
		}
		return types.NewStringList(types.DefaultTypeAdapter, nil)
	case fieldNeeds:
		if u != nil {
			return types.NewStringList(types.DefaultTypeAdapter, u.NeedsConfirmation)
		}
		return types.NewStringList(types.DefaultTypeAdapter, c.NeedsConfirmation)
	case fieldPath:
		return types.String(cv.path())
	case fieldLevel:
		return types.String(cv.level().String())
	}
	return types.NewErr("no such field %q in the claim", f.name)
}

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
	if s, ok := cv.field(f).(types.String); ok {
		return string(s)
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

// Get implements traits.Indexer.
func (it *itemVal) Get(index ref.Val) ref.Val {
	name, _ := fieldName(index)
	ev := it.ev
	switch name {
	case "type":
		return types.String(ev.Type)
	case "time":
		return types.Duration{Duration: ev.Time}
	case "params":
		return types.NewStringList(types.DefaultTypeAdapter, ev.Params)
	case "raw":
		return types.String(ev.Raw)
	case "structured":
		return types.Bool(ev.Structured)
	case "path":
		return types.String(ev.Path)
	case "verified":
		return types.Bool(it.verified)
	}
	return types.NewErr("no such field %q in an evidence item", name)
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

func durOrNull(d time.Duration, ok bool) ref.Val {
	if !ok {
		return types.NullValue
	}
	return types.Duration{Duration: d}
}

func strList(s []string) ref.Val { return types.NewStringList(types.DefaultTypeAdapter, s) }

var emptyList = types.NewStringList(types.DefaultTypeAdapter, nil)

// bind returns the implementation of a rule function's overload over st
// (knowledge.RuleFuncs).
func (st *evalState) bind(overload string) cel.OverloadOpt {
	unit := func(v ref.Val) (facts.Unit, bool) {
		id, ok := v.(types.Int)
		if !ok || !st.r.hasFacts {
			return facts.Unit{}, false
		}
		return st.r.unit(int64(id)), true
	}
	item := func(v ref.Val) (*itemVal, bool) {
		it, ok := v.(*itemVal)
		return it, ok
	}
	str := func(v ref.Val) string { s, _ := v.(types.String); return string(s) }
	notItem := types.NewErr("want an evidence item")
	switch overload {
	case "observed_int":
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			u, ok := unit(v)
			return types.Bool(ok && u.Observed())
		})
	case "owners_int":
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			u, ok := unit(v)
			if !ok {
				return emptyList
			}
			return strList(u.Players())
		})
	case "unit_powers_int":
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			u, ok := unit(v)
			if !ok {
				return emptyList
			}
			return strList(u.Powers())
		})
	case "used_power_int_string":
		return cel.BinaryBinding(func(v, p ref.Val) ref.Val {
			u, ok := unit(v)
			return types.Bool(ok && u.UsedPower(str(p)))
		})
	case "acted_as_int_string":
		return cel.BinaryBinding(func(v, role ref.Val) ref.Val {
			u, ok := unit(v)
			return types.Bool(ok && u.ActedAs(str(role)))
		})
	case "first_seen_int":
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			u, ok := unit(v)
			if !ok {
				return types.NullValue
			}
			return durOrNull(u.FirstObserved())
		})
	case "first_production_string_string":
		return cel.BinaryBinding(func(player, asset ref.Val) ref.Val {
			if !st.r.hasFacts {
				return types.NullValue
			}
			return durOrNull(st.r.ix.FirstProduction(str(player), str(asset)))
		})
	case "is_player_string":
		return cel.UnaryBinding(func(v ref.Val) ref.Val { return types.Bool(st.r.knownPlayer(str(v))) })
	case "has_role_string_string":
		return cel.BinaryBinding(func(kind, role ref.Val) ref.Val {
			return types.Bool(st.r.ix.Kind(str(kind)).HasRole(str(role)))
		})
	case "cites_dyn":
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			it, ok := item(v)
			if !ok {
				return notItem
			}
			ev := it.ev
			return types.Bool(ev.Structured && it.kind().Matches(facts.Evidence{Type: ev.Type, At: ev.Time, Params: ev.Params}, st.r.tol))
		})
	case "nearest_dyn":
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			it, ok := item(v)
			if !ok {
				return notItem
			}
			ev := it.ev
			if !ev.Structured {
				return types.NullValue
			}
			if op, ok := it.kind().Nearest(facts.Evidence{Type: ev.Type, At: ev.Time, Params: ev.Params}, st.r.tol); ok {
				return types.String(op.Text)
			}
			return types.NullValue
		})
	case "item_field_dyn_string":
		return cel.BinaryBinding(func(v, field ref.Val) ref.Val {
			it, ok := item(v)
			if !ok {
				return notItem
			}
			fields, _ := it.kind().EvidenceFields()
			return types.String(param(it.ev, fields, str(field)))
		})
	case "item_unit_dyn":
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			it, ok := item(v)
			if !ok {
				return notItem
			}
			fields, _ := it.kind().EvidenceFields()
			if id, ok := unitParam(it.ev, fields); ok {
				return types.Int(id)
			}
			return types.NullValue
		})
	case "record_string_string":
		return cel.BinaryBinding(func(set, key ref.Val) ref.Val { return st.record(str(set), str(key)) })
	case "records_string":
		return cel.UnaryBinding(func(set ref.Val) ref.Val { return st.records(str(set)) })
	case "scope_of_string":
		return cel.UnaryBinding(func(v ref.Val) ref.Val { return types.String(st.r.scopeOf(str(v))) })
	case "knows_scope_string":
		return cel.UnaryBinding(func(v ref.Val) ref.Val { return types.Bool(st.r.view(str(v)).Exists()) })
	case "asset_string_string":
		return cel.BinaryBinding(func(scope, name ref.Val) ref.Val {
			if e := st.r.view(str(scope)).Entry(str(name)); e != nil {
				return entryVal{e}
			}
			return types.NullValue
		})
	case "has_tag_dyn_string":
		return cel.BinaryBinding(func(e, tag ref.Val) ref.Val {
			ev, ok := e.(entryVal)
			return types.Bool(ok && ev.e.HasTag(str(tag)))
		})
	case "assets_with_tag_string_string":
		return cel.BinaryBinding(func(scope, tag ref.Val) ref.Val {
			return strList(st.r.view(str(scope)).AssetsWithTag(str(tag)))
		})
	case "assets_with_power_string_string":
		return cel.BinaryBinding(func(scope, power ref.Val) ref.Val {
			var buf powerTagBuf
			return strList(st.r.view(str(scope)).AssetsWithTag(buf.tag(str(power))))
		})
	case "carries_power_dyn_string":
		return cel.BinaryBinding(func(e, power ref.Val) ref.Val {
			ev, ok := e.(entryVal)
			var buf powerTagBuf
			return types.Bool(ok && ev.e.HasTag(buf.tag(str(power))))
		})
	case "any_asset_has_tag_string_string":
		return cel.BinaryBinding(func(name, tag ref.Val) ref.Val {
			if st.r.set == nil {
				return types.False
			}
			t := str(tag)
			for _, e := range st.r.set.Lookup(str(name)) {
				if e.Entry.HasTag(t) {
					return types.True
				}
			}
			return types.False
		})
	case "level_at_least_string_string":
		return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
			la, oka := claims.ParseLevel(str(a))
			lb, okb := claims.ParseLevel(str(b))
			if !oka || !okb {
				return types.NewErr("unknown evidence level")
			}
			return types.Bool(levelRank(la) >= levelRank(lb))
		})
	case "clock_duration":
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			d, _ := v.(types.Duration)
			return types.String(interceptors.FormatClock(d.Duration))
		})
	case "listing_list":
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			s, err := stringList(v)
			if err != nil {
				return types.WrapErr(err)
			}
			return types.String(joinList(s, st.r.c.sep))
		})
	case "written_dyn_string":
		return cel.BinaryBinding(func(v, field ref.Val) ref.Val {
			cv, ok := v.(*claimVal)
			if !ok {
				return types.NewErr("want a claim")
			}
			return types.String(cv.written(str(field)))
		})
	}
	return nil
}

// record and records answer the records functions; the facts read from JSON
// arrive with the records index (interceptors/facts): until then no set has
// records.
func (st *evalState) record(set, key string) ref.Val { return types.NullValue }

func (st *evalState) records(set string) ref.Val {
	return types.NewRefValList(types.DefaultTypeAdapter, nil)
}
