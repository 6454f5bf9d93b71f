package facts

import (
	"slices"

	"github.com/factgate/factgate/interceptors"
)

// Relevant returns the "relevant facts" excerpt of a revision request: every
// operation that names one of units, or whose asset is one of assets, or whose
// power is one of powers, as source lines ordered by time, and how many such
// operations were left out to stay within maxLines lines (maxLines <= 0: no
// bound).
//
// Over the bound it keeps, in this order of preference, until maxLines are taken:
//  1. the first and last operation of each unit, and the first operation naming
//     each asset and each power (when a unit was first seen, when it was last seen,
//     when the asset first appeared);
//  2. every other operation in which a requested unit plays a role (builds,
//     productions, powers, sales) and every use of a requested power — what
//     identifies a unit;
//  3. the rest (selections, repeated productions), spread evenly over time.
//
// When a preference level does not fit whole, its operations are spread evenly
// over time.
func (ix *Index) Relevant(units []int64, assets, powers []string, maxLines int) ([]interceptors.FactLine, int) {
	if ix == nil || len(ix.recs) == 0 {
		return nil, 0
	}
	level := map[int32]uint8{}
	put := func(i int32, l uint8) {
		if old, ok := level[i]; !ok || l < old {
			level[i] = l
		}
	}
	const first, role, rest = 0, 1, 2
	for _, u := range units {
		l := ix.unitList(u)
		for k, i := range l {
			switch {
			case k == 0 || k == len(l)-1:
				put(i, first)
			case ix.roles(&ix.recs[i])&actingRoles != 0:
				put(i, role)
			default:
				put(i, rest)
			}
		}
	}
	for _, a := range assets {
		for k, i := range ix.nameList(ix.byAsset, a) {
			if k == 0 {
				put(i, first)
			} else {
				put(i, rest)
			}
		}
	}
	for _, p := range powers {
		for k, i := range ix.nameList(ix.byPower, p) {
			if k == 0 {
				put(i, first)
			} else {
				put(i, role)
			}
		}
	}
	if len(level) == 0 {
		return nil, 0
	}

	chosen := make([]int32, 0, len(level))
	if maxLines <= 0 || len(level) <= maxLines {
		for i := range level {
			chosen = append(chosen, i)
		}
	} else {
		var byLevel [rest + 1][]int32
		for i, l := range level {
			byLevel[l] = append(byLevel[l], i)
		}
		for _, group := range byLevel {
			room := maxLines - len(chosen)
			if room <= 0 {
				break
			}
			slices.Sort(group)
			chosen = append(chosen, spread(group, room)...)
		}
	}
	slices.Sort(chosen)
	lines := make([]interceptors.FactLine, len(chosen))
	for k, i := range chosen {
		lines[k] = interceptors.FactLine{At: ix.recs[i].at, Text: ix.str(ix.recs[i].text)}
	}
	return lines, len(level) - len(chosen)
}

// actingRoles are the roles in which a unit does something that tells what it
// is (as opposed to being selected).
var actingRoles = func() roleSet {
	var s roleSet
	for _, r := range []string{RoleBuilder, RoleProducer, RolePower, RoleSell} {
		b, _ := roleBit(r)
		s |= b
	}
	return s
}()

// spread picks n of the sorted items, evenly spaced, always including the first
// (and the last when n > 1); all of them when they fit.
func spread(items []int32, n int) []int32 {
	if len(items) <= n {
		return items
	}
	if n == 1 {
		return items[:1]
	}
	out := make([]int32, n)
	for k := range n {
		out[k] = items[k*(len(items)-1)/(n-1)]
	}
	return out
}
