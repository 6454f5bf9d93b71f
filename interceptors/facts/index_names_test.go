package facts

import (
	"slices"
	"testing"
	"time"
)

// naiveDistinct is UnitPlayers/UnitPowers as they were written before
// distinctNames: the reference the shared-slice version must agree with.
func naiveDistinct(ix *Index, unit int64, powers bool) []string {
	var out []string
	for _, op := range ix.UnitOps(unit, "") {
		name := op.Player
		if powers {
			name = ""
			if ix.HasRole(op.Kind, RolePower) {
				name = op.Power
			}
		}
		if name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// TestUnitNamesAgreeWithReference compares UnitPlayers and UnitPowers with the
// reference for every unit of the replays, including a unit on two players'
// lines and one that used two powers, and checks that a one-name result cannot
// be appended over (BenchmarkUnitNamesOne reports its allocations).
func TestUnitNamesAgreeWithReference(t *testing.T) {
	base := replay(t, "allied_vs_soviet.txt")
	// Unit 246 on PlayerB's lines too, and using a second power.
	extra := "14:40.00 PlayerB 选择 [UnitId]246\n14:41.00 PlayerA 使用 SpecialPower_UnpackReplaceSelf [UnitId]246\n"
	for name, ix := range map[string]*Index{
		"allied_vs_soviet":       extract(t, base),
		"allied_vs_soviet.large": extractReplay(t, "allied_vs_soviet.large.txt"),
		"with two owners":        extract(t, base, extra),
	} {
		several := 0
		for _, u := range append(ix.Units(), 424242) {
			for _, powers := range []bool{false, true} {
				var got []string
				if powers {
					got = ix.UnitPowers(u)
				} else {
					got = ix.UnitPlayers(u)
				}
				want := naiveDistinct(ix, u, powers)
				if !slices.Equal(got, want) {
					t.Fatalf("%s: unit %d (powers %v): got %q, want %q", name, u, powers, got, want)
				}
				if len(got) > 1 {
					several++
				}
				if len(got) == 1 && cap(got) != 1 {
					t.Fatalf("%s: unit %d: a one-name result has capacity %d: an append would write into the index", name, u, cap(got))
				}
			}
		}
		if name == "with two owners" && several == 0 {
			t.Errorf("%s: no unit with two players or powers: the test line did not parse", name)
		}
	}
}

// BenchmarkUnitNamesOne reports the allocations of UnitPlayers+UnitPowers for a
// one-player, one-power unit (0 when the one name is shared with the index).
func BenchmarkUnitNamesOne(b *testing.B) {
	ix := extract(b, replay(b, "allied_vs_soviet.txt"))
	b.ReportAllocs()
	for b.Loop() {
		ix.UnitPlayers(246)
		ix.UnitPowers(246)
	}
}

// TestKindAnswersAsIndex: a Kind found once answers what the Index's by-name
// methods answer, in any case of the name, and a nil index's or an unknown
// name's Kind answers nothing.
func TestKindAnswersAsIndex(t *testing.T) {
	t.Parallel()
	ix := extractReplay(t, "allied_vs_soviet.txt")
	ops := ix.Ops()
	for _, name := range []string{"build", "BUILD", "produce", "power", "select", "sell", "move", "nonesuch", ""} {
		k := ix.Kind(name)
		fields, ok := k.EvidenceFields()
		wantFields, wantOK := ix.EvidenceFields(name)
		if ok != wantOK || !slices.Equal(fields, wantFields) {
			t.Errorf("%q: fields %q %v, want %q %v", name, fields, ok, wantFields, wantOK)
		}
		for _, role := range append(knownRoles[:], "pilot") {
			if k.HasRole(role) != ix.HasRole(name, role) {
				t.Errorf("%q: HasRole(%q) = %v, Index.HasRole = %v", name, role, k.HasRole(role), ix.HasRole(name, role))
			}
		}
	}
	matched := 0
	for i := 0; i < len(ops); i += 7 {
		op := &ops[i]
		fields, ok := ix.EvidenceFields(op.Kind)
		if !ok {
			continue
		}
		params := make([]string, len(fields))
		for j, f := range fields {
			switch f {
			case fieldUnit, fieldUnits:
				if len(op.Units) > 0 {
					params[j] = itoa(op.Units[0])
				}
			case fieldAsset:
				params[j] = op.Asset
			case fieldPower:
				params[j] = op.Power
			case fieldPlayer:
				params[j] = op.Player
			case fieldPos:
				params[j] = ftoa(op.Pos[0]) + "," + ftoa(op.Pos[1]) + "," + ftoa(op.Pos[2])
			}
		}
		for _, at := range []time.Duration{op.At, op.At + 3*time.Second} {
			e := Evidence{Type: op.Kind, At: at, Params: params}
			if got, want := ix.Kind(op.Kind).Matches(e, time.Second), ix.Matches(e, time.Second); got != want {
				t.Errorf("op %d %s at %v: Kind.Matches = %v, Index.Matches = %v", i, op.Kind, at, got, want)
			} else if got {
				matched++
			}
		}
	}
	if matched == 0 {
		t.Error("no citation matched: the test compares only misses")
	}
	var none *Index
	if k := none.Kind("build"); k.HasRole(RoleBuilder) || k.Matches(Evidence{Type: "build"}, time.Second) {
		t.Error("a nil index's Kind answers")
	}
	if _, ok := none.Kind("build").EvidenceFields(); ok {
		t.Error("a nil index's Kind has evidence fields")
	}
}
