package facts

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestUnitSetAgreesWithSorting: the bit set lists the same UnitIds in the same
// order as sorting the mentions, and a unit's slot is its index there — for
// clustered, sparse, negative and single-unit sets; a range too wide for it falls
// back to sorting.
func TestUnitSetAgreesWithSorting(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	cases := map[string][]int64{
		"one unit":    {246},
		"repeated":    {7, 7, 7},
		"word edges":  {0, 63, 64, 127, 128, 1000},
		"negative":    {-5, -1, 0, 3},
		"too sparse":  {1, 1 << 40},
		"real replay": nil,
	}
	clustered := make([]int64, 5000)
	for i := range clustered {
		clustered[i] = 200 + r.Int64N(20000)
	}
	cases["clustered"] = clustered
	ix := extractReplay(t, "allied_vs_soviet.txt")
	cases["real replay"] = ix.units
	for name, units := range cases {
		want := slices.Compact(slices.Sorted(slices.Values(units)))
		set, ok := newUnitSet(units)
		if name == "too sparse" {
			if ok {
				t.Errorf("%s: a set over a range of 2^40 UnitIds", name)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: no set", name)
			continue
		}
		if got := set.ids(); !slices.Equal(got, want) {
			t.Errorf("%s: ids %v, want %v", name, got, want)
		}
		for i, u := range want {
			if s := set.slot(u); s != i {
				t.Errorf("%s: slot of %d is %d, want %d", name, u, s, i)
			}
		}
	}
}
