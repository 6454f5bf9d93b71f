package facts

import (
	"strconv"
	"strings"
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
		{"a position at another time (no unit to look up)", ev(t, "move", "0:55.00", "2176.2,1769.2,0"), "0:51.37 PlayerA 移动 @ (2176.2,1769.2,0.0)"},
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

// TestNearestAgreesWithAScanOfEveryOperation checks the indexed lookup against
// the definition — every operation of the kind scored — on items made from the
// log's operations: their time shifted, their unit or asset changed.
func TestNearestAgreesWithAScanOfEveryOperation(t *testing.T) {
	t.Parallel()
	ix := extractReplay(t, "allied_vs_soviet.txt")
	const tol = 500 * time.Millisecond
	ops := ix.Ops()
	checked := 0
	for n, op := range ops {
		fields, ok := ix.EvidenceFields(op.Kind)
		if !ok {
			continue
		}
		params := func(unitDelta int64, asset string) []string {
			var out []string
			for _, f := range fields {
				switch f {
				case fieldUnit, fieldUnits:
					out = append(out, strconv.FormatInt(op.Units[0]+unitDelta, 10))
				case fieldAsset:
					out = append(out, asset)
				case fieldPower:
					out = append(out, op.Power)
				case fieldPos:
					out = append(out, strconv.FormatFloat(op.Pos[0], 'f', 1, 64)+","+strconv.FormatFloat(op.Pos[1], 'f', 1, 64)+","+strconv.FormatFloat(op.Pos[2], 'f', 1, 64))
				case fieldPlayer:
					out = append(out, op.Player)
				}
			}
			return out
		}
		other := ops[(n*7+3)%len(ops)].Asset
		for _, e := range []Evidence{
			{Type: op.Kind, At: op.At + 6500*time.Millisecond, Params: params(0, op.Asset)},
			{Type: op.Kind, At: op.At, Params: params(1, op.Asset)},
			{Type: op.Kind, At: op.At + 3*time.Second, Params: params(0, other)},
			{Type: strings.ToUpper(op.Kind), At: op.At - 40*time.Second, Params: params(2, other)},
		} {
			want, wantOK := nearestByScan(ix, e, tol)
			got, gotOK := ix.Kind(e.Type).Nearest(e, tol)
			if gotOK != wantOK || gotOK && got.Text != want.Text {
				t.Fatalf("Nearest(%+v) = %v %v, the scan finds %v %v", e, got, gotOK, want, wantOK)
			}
			checked++
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d items checked", checked)
	}
}

// nearestByScan is Nearest's definition: every operation of the kind scored.
func nearestByScan(ix *Index, e Evidence, tol time.Duration) (*Op, bool) {
	k := ix.Kind(e.Type)
	kd := &ix.schema.kinds[k.id]
	if !k.ok || !kd.hasEvidence || len(e.Params) != len(kd.evidence) {
		return nil, false
	}
	n := nearest{best: -1, bestClass: noClass}
	for _, i := range ix.byKind[k.id] {
		r := &ix.recs[i]
		matched, unitMatched, firstUnit := 0, false, true
		for p, param := range e.Params {
			w, ok := parseParam(kd.evidence[p], trimParam(param))
			isUnit := ok && (w.field == fieldUnit || w.field == fieldUnits) && firstUnit
			if isUnit {
				firstUnit = false
			}
			if ok && ix.recMatches(r, []paramWant{w}) {
				matched++
				unitMatched = unitMatched || isUnit
			}
		}
		diff := r.at - e.At
		if diff < 0 {
			diff = -diff
		}
		class := noClass
		switch {
		case matched == len(e.Params):
			class = 1
		case matched > 0 && diff <= tol:
			class = 2
		case unitMatched:
			class = 3
		}
		n.offer(i, class, matched, diff)
	}
	if n.best < 0 {
		return nil, false
	}
	return ix.opPtr(n.best), true
}

// BenchmarkNearest measures what a failed citation costs on the 17,797-line log:
// Nearest reads every operation of the item's kind (select: most of the log).
func BenchmarkNearest(b *testing.B) {
	ix := extractReplay(b, "allied_vs_soviet.large.txt")
	const tol = 500 * time.Millisecond
	for _, c := range []struct {
		name string
		e    Evidence
	}{
		{"select shifted", ev(b, "select", "1:07.00", "900")},
		{"produce, another unit", ev(b, "produce", "0:35.00", "AlliedAntiInfantryInfantry", "311")},
	} {
		b.Run(c.name, func(b *testing.B) {
			k := ix.Kind(c.e.Type)
			b.ReportAllocs()
			for b.Loop() {
				k.Nearest(c.e, tol)
			}
		})
	}
}
