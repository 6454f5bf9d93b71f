package facts

import (
	"strings"
	"testing"
	"time"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	ix := extractReplay(t, "allied_vs_soviet.txt")
	const tol = 500 * time.Millisecond
	tests := []struct {
		name     string
		e        Evidence
		tol      time.Duration
		wantLine string // "" = no match
	}{
		{"power exact", ev(t, "power", "1:24.00", "SpecialPower_PackReplaceSelf", "246"), tol, "1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246"},
		{"time without fraction", ev(t, "power", "1:24", "SpecialPower_PackReplaceSelf", "246"), tol, "1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246"},
		{"type in any case", ev(t, "POWER", "1:24.00", "SpecialPower_PackReplaceSelf", "246"), tol, "1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246"},
		{"tolerance edge, early, inclusive", ev(t, "power", "1:23.50", "SpecialPower_PackReplaceSelf", "246"), tol, "1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246"},
		{"tolerance edge, late, inclusive", ev(t, "power", "1:24.50", "SpecialPower_PackReplaceSelf", "246"), tol, "1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246"},
		{"just past tolerance, early", ev(t, "power", "1:23.49", "SpecialPower_PackReplaceSelf", "246"), tol, ""},
		{"just past tolerance, late", ev(t, "power", "1:24.51", "SpecialPower_PackReplaceSelf", "246"), tol, ""},
		{"zero tolerance exact", ev(t, "power", "1:24.00", "SpecialPower_PackReplaceSelf", "246"), 0, "1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246"},
		{"negative tolerance is zero", ev(t, "power", "1:24.00", "SpecialPower_PackReplaceSelf", "246"), -time.Second, "1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246"},
		{"wrong power", ev(t, "power", "1:24.00", "SpecialPower_UnpackReplaceSelf", "246"), tol, ""},
		{"wrong unit", ev(t, "power", "1:24.00", "SpecialPower_PackReplaceSelf", "247"), tol, ""},
		{"unit with leading zeros is the same integer", ev(t, "power", "1:24.00", "SpecialPower_PackReplaceSelf", "0246"), tol, "1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246"},
		{"unit with blanks", ev(t, "power", "1:24.00", " SpecialPower_PackReplaceSelf ", " 246 "), tol, "1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246"},
		{"unit not a number", ev(t, "power", "1:24.00", "SpecialPower_PackReplaceSelf", "two-four-six"), tol, ""},
		{"asset names compare exactly", ev(t, "build", "0:02.10", "alliedpowerplant", "246"), tol, ""},
		{"build", ev(t, "build", "0:02.10", "AlliedPowerPlant", "246"), tol, "0:02.10 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)"},
		{"place, position as numbers", ev(t, "place", "0:09.50", "AlliedPowerPlant", "246", "1204.5,880,12"), tol, "0:09.50 PlayerA 放置建筑 AlliedPowerPlant [UnitId]246(建造者) @ (1204.5,880.0,12.0)"},
		{"place, position padded", ev(t, "place", "0:09.50", "AlliedPowerPlant", "246", "1204.50, 880.00, 12.000"), tol, "0:09.50 PlayerA 放置建筑 AlliedPowerPlant [UnitId]246(建造者) @ (1204.5,880.0,12.0)"},
		{"place, position in parentheses", ev(t, "place", "0:09.50", "AlliedPowerPlant", "246", "(1204.5,880.0,12.0)"), tol, "0:09.50 PlayerA 放置建筑 AlliedPowerPlant [UnitId]246(建造者) @ (1204.5,880.0,12.0)"},
		{"place, other position", ev(t, "place", "0:09.50", "AlliedPowerPlant", "246", "1204.6,880,12"), tol, ""},
		{"place, position not numbers", ev(t, "place", "0:09.50", "AlliedPowerPlant", "246", "here"), tol, ""},
		{"select of several units, first", ev(t, "select", "0:46.71", "1400"), tol, "0:46.71 PlayerB 选择 [UnitId]1400 [UnitId]1401 [UnitId]1402 [UnitId]1403"},
		{"select of several units, last", ev(t, "select", "0:46.71", "1403"), tol, "0:46.71 PlayerB 选择 [UnitId]1400 [UnitId]1401 [UnitId]1402 [UnitId]1403"},
		{"select of a unit not in the selection", ev(t, "select", "0:46.71", "1404"), tol, ""},
		{"select 733", ev(t, "select", "6:02.00", "733"), tol, "6:02.00 PlayerA 选择 [UnitId]733"},
		{"move", ev(t, "move", "0:51.37", "2176.2,1769.2,0"), tol, "0:51.37 PlayerA 移动 @ (2176.2,1769.2,0.0)"},
		{"sell", ev(t, "sell", "14:00", "512"), tol, "14:00.00 PlayerB 出售 [UnitId]512"},
		{"sell at a time nothing happened", ev(t, "sell", "20:00.00", "250"), tol, ""},
		{"too few params", ev(t, "power", "1:24.00", "SpecialPower_PackReplaceSelf"), tol, ""},
		{"too many params", ev(t, "sell", "14:00.00", "512", "PlayerB"), tol, ""},
		{"unknown type", ev(t, "attack", "1:24.00", "246"), tol, ""},
		{"produce", ev(t, "produce", "9:10.00", "AlliedBomberAircraft", "655"), tol, "9:10.00 PlayerA 生产单位 AlliedBomberAircraft [UnitId]655(生产者)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op, ok := ix.Match(tc.e, tc.tol)
			if ok != (tc.wantLine != "") || (ok && op.Text != tc.wantLine) {
				got := ""
				if op != nil {
					got = op.Text
				}
				t.Fatalf("Match = %q, %v; want %q", got, ok, tc.wantLine)
			}
		})
	}
}

// TestMatchClosest checks that among several matching operations the one closest
// in time is cited, the earlier one on a tie.
func TestMatchClosest(t *testing.T) {
	t.Parallel()
	ix := extract(t, "0:10.00 A 选择 [UnitId]5\n0:10.40 A 选择 [UnitId]5\n0:10.80 A 选择 [UnitId]5\n0:11.20 A 选择 [UnitId]5\n")
	tests := []struct {
		name string
		at   string
		want string
	}{
		{"exact", "0:10.40", "0:10.40"},
		{"nearer the later", "0:10.70", "0:10.80"},
		{"tie takes the earlier", "0:10.60", "0:10.40"},
		{"before all", "0:09.50", "0:10.00"},
		{"after all", "0:11.70", "0:11.20"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op, ok := ix.Match(ev(t, "select", tc.at, "5"), 500*time.Millisecond)
			if !ok || op.At != clock(t, tc.want) {
				t.Fatalf("Match at %s = %v, %v; want the op at %s", tc.at, op, ok, tc.want)
			}
		})
	}
}

func TestMatchNilAndEmptyIndex(t *testing.T) {
	t.Parallel()
	for name, ix := range map[string]*Index{"nil": nil, "no facts": extract(t, "just prose")} {
		if _, ok := ix.Match(ev(t, "sell", "1:00", "1"), time.Second); ok {
			t.Errorf("%s index matched", name)
		}
	}
}

func ev(tb testing.TB, typ, at string, params ...string) Evidence {
	tb.Helper()
	return Evidence{Type: typ, At: clock(tb, at), Params: params}
}

// TestMatchCaseEvidence replays the structured evidence of the validation cases
// (fixtures/ra3/cases): what a correct validator must find in the facts, and the
// items the cases expect to be reported as not in the replay.
func TestMatchCaseEvidence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		replay string
		items  []string
		found  bool
	}{
		{"c01 clean", "allied_vs_soviet.txt", []string{
			"build|0:02.10|AlliedPowerPlant|246", "power|1:24|SpecialPower_PackReplaceSelf|246",
			"power|1:41.00|SpecialPower_UnpackReplaceSelf|587", "produce|5:30.00|AlliedFighterAircraft|655",
			"produce|9:10.00|AlliedBomberAircraft|655", "select|9:40.00|801", "build|1:50.00|AlliedPowerPlant|612",
			"produce|10:30.00|SovietBomberAircraft|680", "build|1:20.00|SovietPowerPlant|700",
		}, true},
		{"c02 citations hold", "mcv_vs_miner.txt", []string{
			"power|1:24.00|SpecialPower_PackReplaceSelf|246", "select|1:30.10|587",
			"power|1:41.00|SpecialPower_UnpackReplaceSelf|587", "build|1:55.00|AlliedPowerPlant|612",
		}, true},
		{"c05 and c07 citations hold", "allied_vs_soviet.txt", []string{"select|6:02.00|733", "move|6:03.50|3000.0,2600.0,0.0"}, true},
		{"c08 selections", "allied_vs_soviet.txt", []string{
			"select|1:06.39|900", "select|1:12.31|901", "select|1:12.31|902", "select|1:12.31|903",
			"select|1:23.41|905", "select|1:27.03|908", "select|1:43.74|911",
		}, true},
		{"c16 corona", "corona_celestial_vs_allied.txt", []string{
			"produce|2:20.00|CelestialFighterAircraft|266", "power|2:10.00|SpecialPower_UnpackReplaceSelf|420", "select|4:22.00|333",
		}, true},
		{"c03 power never used by 301", "allied_vs_soviet.txt", []string{"power|7:32.00|SpecialPower_UnpackReplaceSelf|301"}, false},
		{"c04 selection 3 s off", "allied_vs_soviet.txt", []string{"select|6:05.00|733"}, false},
		{"c13 after the end", "allied_vs_soviet.txt", []string{"sell|20:00.00|250"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ix := extractReplay(t, tc.replay)
			for _, item := range tc.items {
				parts := strings.Split(item, "|")
				if _, ok := ix.Match(ev(t, parts[0], parts[1], parts[2:]...), 500*time.Millisecond); ok != tc.found {
					t.Errorf("Match(%s) = %v, want %v", item, ok, tc.found)
				}
			}
		})
	}
}
