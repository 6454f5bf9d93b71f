package facts

import (
	"testing"
	"time"
)

// TestNearest: what the facts have instead of an evidence item they do not hold
// — the same operation at another time, another operation at the cited time, or
// the cited unit's operation of that kind.
func TestNearest(t *testing.T) {
	t.Parallel()
	ix := extractReplay(t, "allied_vs_soviet.txt")
	const tol = 500 * time.Millisecond
	tests := []struct {
		name     string
		e        Evidence
		wantLine string // "" = nothing
	}{
		{"the time is off: the same operation", ev(t, "select", "1:07.00", "900"), "1:06.39 PlayerA 选择 [UnitId]900"},
		{"the time is off by seconds", ev(t, "produce", "0:41.50", "AlliedAntiInfantryInfantry", "310"), "0:35.00 PlayerA 生产单位 AlliedAntiInfantryInfantry [UnitId]310(生产者)"},
		{"another unit at the cited time", ev(t, "build", "0:10.20", "AlliedRefinery", "235"), "0:10.20 PlayerA 开始建造建筑 AlliedRefinery [UnitId]246(建造者)"},
		{"the power at another time", ev(t, "power", "1:30.00", "SpecialPower_PackReplaceSelf", "246"), "1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246"},
		{"the unit's operation of that kind", ev(t, "produce", "0:45.00", "AlliedMiner", "310"), "0:49.59 PlayerA 生产单位 AlliedAntiVehicleInfantry [UnitId]310(生产者)"},
		{"nothing of the unit, nothing at the time", ev(t, "sell", "20:00.00", "999999"), ""},
		{"a unit that is not a number", ev(t, "select", "1:07.00", "nine hundred"), ""},
		{"another number of parameters", ev(t, "power", "1:24.00", "SpecialPower_PackReplaceSelf"), ""},
		{"an unknown type", ev(t, "attack", "1:24.00", "246"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op, ok := ix.Kind(tc.e.Type).Nearest(tc.e, tol)
			got := ""
			if ok {
				got = op.Text
			}
			if got != tc.wantLine {
				t.Errorf("Nearest = %q, want %q", got, tc.wantLine)
			}
		})
	}
	var nilIndex *Index
	if _, ok := nilIndex.Kind("select").Nearest(ev(t, "select", "1:07.00", "900"), tol); ok {
		t.Error("a nil index has something near")
	}
}
