package facts

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The read side's shortcuts checked against what they replace: a UnitId parse
// without strconv, a trim without the call, kinds found by comparison instead of
// hashing, and a unit looked up once (Unit) instead of per question.

// refUnit answers the Unit questions from ix.Ops() alone, by brute force.
type refUnit struct {
	observed bool
	first    time.Duration
	players  []string
	powers   []string
	roles    map[string]bool
}

// refUnits answers the Unit questions for every unit of ix in one pass over
// ix.Ops().
func refUnits(ix *Index) map[int64]*refUnit {
	out := map[int64]*refUnit{}
	for _, op := range ix.Ops() {
		for _, unit := range op.Units {
			r := out[unit]
			if r == nil {
				r = &refUnit{observed: true, first: op.At, roles: map[string]bool{}}
				out[unit] = r
			}
			if op.Player != "" && !slices.Contains(r.players, op.Player) {
				r.players = append(r.players, op.Player)
			}
			for _, role := range knownRoles {
				if ix.HasRole(op.Kind, role) {
					r.roles[role] = true
				}
			}
			if ix.HasRole(op.Kind, RolePower) && op.Power != "" && !slices.Contains(r.powers, op.Power) {
				r.powers = append(r.powers, op.Power)
			}
		}
	}
	return out
}

func TestUnitMatchesOps(t *testing.T) {
	t.Parallel()
	for _, name := range replayNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ix := extractReplay(t, name)
			units := ix.Units()
			// Every UnitId the index knows, plus neighbours it does not.
			probe := append(slices.Clone(units), -1, 0, 1<<40)
			for _, u := range units {
				probe = append(probe, u+1)
			}
			powers := map[string]bool{"": true, "SpecialPower_None": true}
			for _, op := range ix.Ops() {
				powers[op.Power] = true
			}
			ref := refUnits(ix)
			for _, id := range probe {
				want := ref[id]
				if want == nil {
					want = &refUnit{}
				}
				u := ix.Unit(id)
				first, ok := u.FirstObserved()
				if u.Observed() != want.observed || ok != want.observed || first != want.first {
					t.Fatalf("unit %d: observed %v first %v %v; want %v %v", id, u.Observed(), first, ok, want.observed, want.first)
				}
				if got := u.Players(); !slices.Equal(got, want.players) {
					t.Fatalf("unit %d: players %q; want %q", id, got, want.players)
				}
				if got := u.Powers(); !slices.Equal(got, want.powers) {
					t.Fatalf("unit %d: powers %q; want %q", id, got, want.powers)
				}
				for _, role := range append(knownRoles[:], "", "unknown") {
					if got := u.ActedAs(role); got != want.roles[role] {
						t.Fatalf("unit %d: ActedAs(%q) = %v; want %v", id, role, got, want.roles[role])
					}
				}
				for p := range powers {
					if got, want := u.UsedPower(p), p != "" && slices.Contains(want.powers, p); got != want {
						t.Fatalf("unit %d: UsedPower(%q) = %v; want %v", id, p, got, want)
					}
				}
			}
		})
	}
	var nilIndex *Index
	if u := nilIndex.Unit(7); u.Observed() || u.Players() != nil || u.Powers() != nil || u.ActedAs(RoleBuilder) || u.UsedPower("x") {
		t.Fatal("a unit of a nil index names operations")
	}
}

// refParseUnitID is what ParseUnitID replaces.
func refParseUnitID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func checkParseUnitID(t *testing.T, s string) {
	t.Helper()
	n, ok := ParseUnitID(s)
	wn, wok := refParseUnitID(s)
	if n != wn || ok != wok {
		t.Fatalf("ParseUnitID(%q) = %d, %v; strconv %d, %v", s, n, ok, wn, wok)
	}
}

func checkTrimParam(t *testing.T, s string) {
	t.Helper()
	if got, want := trimParam(s), strings.TrimSpace(s); got != want {
		t.Fatalf("trimParam(%q) = %q; strings.TrimSpace %q", s, got, want)
	}
}

func TestUnitIDAndTrimMatchReference(t *testing.T) {
	t.Parallel()
	texts := []string{
		"", "0", "7", "007", "246", "-1", "+5", "1_000", "0x1f", " 246", "246 ", "24 6", "١٢", "9",
		"999999999999999999", "9999999999999999999", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9223372036854775809", "123456789012345678", "1234567890123456789",
		"\u00a0246\u00a0", "\u3000x", "x\u2028", "\t\n\v\f\r x", "~", "!", "\x7f", "\x80", "a\x00",
	}
	// Every text of up to four bytes over digits, signs, a space and a letter.
	alphabet := []byte("019+- a")
	var walk func(prefix []byte)
	walk = func(prefix []byte) {
		texts = append(texts, string(prefix))
		if len(prefix) == 4 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c))
		}
	}
	walk(nil)
	for _, s := range texts {
		checkParseUnitID(t, s)
		checkTrimParam(t, s)
	}
}

func FuzzUnitIDAndTrim(f *testing.F) {
	for _, s := range []string{"246", " 246 ", "9223372036854775808", "-1", "\u00a0x", "+7", "1234567890123456789"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkParseUnitID(t, s)
		checkTrimParam(t, s)
	})
}

// refKindID is kindID as it was: the map alone.
func refKindID(sc *schema, name string) (int, bool) {
	if id, ok := sc.byFold[name]; ok {
		return id, true
	}
	id, ok := sc.byFold[strings.ToLower(name)]
	return id, ok
}

func TestKindIDMatchesMap(t *testing.T) {
	t.Parallel()
	few := &schema{kinds: []kindInfo{{name: "build"}, {name: "Place"}, {name: "POWER"}, {name: "power"}, {name: "sell"}, {name: "Kelvin\u212a"}}}
	many := &schema{}
	for i := range maxScannedKinds + 4 {
		many.kinds = append(many.kinds, kindInfo{name: "Kind" + strconv.Itoa(i)})
	}
	many.kinds = append(many.kinds, kindInfo{name: "kind3"}) // the same lower-case name again
	for _, sc := range []*schema{few, many, {}, extractReplay(t, "allied_vs_soviet.txt").schema} {
		sc.finish()
		names := []string{"", "build", "BUILD", "Build", "place", "PLACE", "power", "Power", "sell", "selL", "move", "kelvin\u212a", "kelvink", "KELVIN\u212a", "kind3", "KIND3", "kind19", "Kind20", "kind21", "\xff"}
		for _, k := range sc.kinds {
			names = append(names, k.name, strings.ToUpper(k.name), strings.ToLower(k.name), k.name+" ")
		}
		for _, name := range names {
			id, ok := sc.kindID(name)
			wid, wok := refKindID(sc, name)
			if id != wid || ok != wok {
				t.Fatalf("kindID(%q) over %d kinds = %d, %v; map %d, %v", name, len(sc.kinds), id, ok, wid, wok)
			}
		}
	}
	var nilSchema *schema
	if _, ok := nilSchema.kindID("build"); ok {
		t.Fatal("a nil schema knows a kind")
	}
}
