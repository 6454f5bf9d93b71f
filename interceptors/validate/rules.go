package validate

// The lookups the rule engine's functions share: a run's memory of the last unit
// and scopes it looked up, an evidence item's parameters by operation field.

import (
	"unsafe"

	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/knowledge"
)

// The op fields an evidence parameter can compare with (knowledge.FactRules.Evidence).
const (
	fieldUnit  = "unit"
	fieldUnits = "units"
	fieldAsset = "asset"
	fieldPower = "power"
)

// unit returns a UnitId as the facts know it, remembering the last one: a unit
// claim's evidence is mostly about the claimed unit.
func (r *run) unit(id int64) facts.Unit {
	if !r.lastUnit.ok || r.lastUnit.id != id {
		r.lastUnit = unitView{id: id, unit: r.ix.Unit(id), ok: true}
	}
	return r.lastUnit.unit
}

// view returns scope as a value of the players' dimension in the knowledge set
// (a scope that does not exist for "" or without a set), remembering the last
// two: a request's unit claims are about one or two factions, and the set's
// scope map hashes two strings.
func (r *run) view(scope string) knowledge.ScopeView {
	if scope == "" || r.set == nil {
		return knowledge.ScopeView{}
	}
	for i := range r.views {
		if v := &r.views[i]; v.ok && v.scope == scope {
			return v.view
		}
	}
	v := r.set.View(r.c.dim, scope)
	r.views[r.nextView] = scopeView{scope: scope, view: v, ok: true}
	r.nextView = (r.nextView + 1) % len(r.views)
	return v
}

// itemSubjects returns the units, assets and powers an evidence item names, for its
// related facts.
func itemSubjects(ev *claims.Evidence, fields []string) (units []int64, assets, powers []string) {
	for i, f := range fields {
		if i >= len(ev.Params) {
			break
		}
		switch f {
		case fieldUnit, fieldUnits:
			if u, ok := facts.ParseUnitID(ev.Params[i]); ok {
				units = append(units, u)
			}
		case fieldAsset:
			assets = append(assets, ev.Params[i])
		case fieldPower:
			powers = append(powers, ev.Params[i])
		}
	}
	return units, assets, powers
}

// powerTagBuf is room for a special-power tag (knowledge.SpecialPowerTag) that is
// only looked up in the knowledge set: built here, on the caller's stack, it costs
// no allocation per power the rules check (the concatenation's own stack buffer
// holds 32 bytes, less than most tags).
type powerTagBuf [96]byte

// tag returns knowledge.SpecialPowerTag(power), in b when it fits. The string
// shares b's memory, so b must not be reused while the string is in use: declare
// the buffer where the tag is needed (escape analysis moves it to the heap if the
// tag is ever kept).
//
// unsafe: a string over b without a copy, read only while b is unchanged and not reused (docs/architecture.md, Lifetimes).
func (b *powerTagBuf) tag(power string) string {
	if len(knowledge.SpecialPowerPrefix)+len(power) > len(b) {
		return knowledge.SpecialPowerTag(power)
	}
	t := append(b[:0], knowledge.SpecialPowerPrefix...)
	t = append(t, power...)
	return unsafe.String(unsafe.SliceData(t), len(t))
}

// unitParam returns the item's UnitId parameter (the first "unit" or "units"
// field), and false when it has none or it is not an integer.
func unitParam(ev *claims.Evidence, fields []string) (int64, bool) {
	for i, f := range fields {
		if (f == fieldUnit || f == fieldUnits) && i < len(ev.Params) {
			return facts.ParseUnitID(ev.Params[i])
		}
	}
	return 0, false
}

// param returns the item's parameter compared with field, or "".
func param(ev *claims.Evidence, fields []string, field string) string {
	for i, f := range fields {
		if f == field && i < len(ev.Params) {
			return ev.Params[i]
		}
	}
	return ""
}
