package facts

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/factgate/factgate/interceptors"
)

// TestExtractFixtureCounts checks every fixture replay against counts taken with
// grep on the op verbs (awk '$3=="选择"' ... | wc -l).
func TestExtractFixtureCounts(t *testing.T) {
	t.Parallel()
	type counts struct{ build, place, produce, sell, sel, move, power int }
	tests := []struct {
		name    string
		replay  string
		want    counts
		lines   int
		players []string
		stated  string // "" = none
		end     string
	}{
		{"whole game", "allied_vs_soviet.txt", counts{14, 14, 96, 2, 141, 130, 4}, 406, []string{"PlayerA", "PlayerB"}, "14:32.40", "14:32.40"},
		{"large game", "allied_vs_soviet.large.txt", counts{14, 14, 96, 2, 8771, 8891, 4}, 17797, []string{"PlayerA", "PlayerB"}, "14:32.40", "14:32.40"},
		{"segment 1", "allied_vs_soviet.part1.txt", counts{12, 12, 26, 0, 48, 46, 3}, 151, []string{"PlayerA", "PlayerB"}, "", "4:58.88"},
		{"segment 2", "allied_vs_soviet.part2.txt", counts{1, 1, 40, 0, 46, 46, 1}, 139, []string{"PlayerB", "PlayerA"}, "", "9:59.41"},
		{"segment 3", "allied_vs_soviet.part3.txt", counts{1, 1, 30, 2, 47, 38, 0}, 123, []string{"PlayerB", "PlayerA"}, "", "14:30.73"},
		{"corona, non-ASCII player", "corona_celestial_vs_allied.txt", counts{5, 5, 26, 0, 35, 40, 1}, 117, []string{"青龙", "Blue"}, "6:00.00", "6:00.00"},
		{"seed ambiguity", "mcv_vs_miner.txt", counts{4, 4, 1, 0, 2, 2, 2}, 19, []string{"Alice", "Boris"}, "", "2:11.00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ix := extractReplay(t, tc.replay)
			got := counts{ix.Count("build"), ix.Count("place"), ix.Count("produce"), ix.Count("sell"), ix.Count("select"), ix.Count("move"), ix.Count("power")}
			if got != tc.want {
				t.Errorf("counts = %+v, want %+v", got, tc.want)
			}
			w := tc.want
			if total := w.build + w.place + w.produce + w.sell + w.sel + w.move + w.power; ix.Len() != total {
				t.Errorf("Len = %d, want %d", ix.Len(), total)
			}
			if ix.Lines() != tc.lines || ix.Unparsed() != 0 || ix.Truncated() {
				t.Errorf("Lines, Unparsed, Truncated = %d, %d, %v; want %d, 0, false", ix.Lines(), ix.Unparsed(), ix.Truncated(), tc.lines)
			}
			if !slices.Equal(ix.Players(), tc.players) {
				t.Errorf("Players = %q, want %q", ix.Players(), tc.players)
			}
			stated, ok := ix.StatedDuration()
			if want := tc.stated != ""; ok != want || (ok && stated != clock(t, tc.stated)) {
				t.Errorf("StatedDuration = %v, %v; want %q", stated, ok, tc.stated)
			}
			if ix.End() != clock(t, tc.end) {
				t.Errorf("End = %v, want %s", ix.End(), tc.end)
			}
			if !slices.IsSortedFunc(ix.Ops(), func(a, b Op) int { return int(a.At - b.At) }) {
				t.Error("operations are not ordered by time")
			}
		})
	}
}

// TestExtractKnownFacts asserts the facts the validation cases rely on.
func TestExtractKnownFacts(t *testing.T) {
	t.Parallel()
	ix := extractReplay(t, "allied_vs_soviet.txt")
	opAt := func(unit int64, role string) []string {
		var out []string
		for _, op := range ix.UnitOps(unit, role) {
			out = append(out, interceptors.FormatClock(op.At)+" "+op.Power+op.Asset)
		}
		return out
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"246 packs at 1:24.00", opAt(246, RolePower), []string{"1:24.00 SpecialPower_PackReplaceSelf"}},
		{"587 unpacks at 1:41.00", opAt(587, RolePower), []string{"1:41.00 SpecialPower_UnpackReplaceSelf"}},
		{"690 unpacks at 7:32", opAt(690, RolePower), []string{"7:32.00 SpecialPower_UnpackReplaceSelf"}},
		{"246 used the pack power", ix.UsedPower(246, "SpecialPower_PackReplaceSelf"), true},
		{"246 never unpacked", ix.UsedPower(246, "SpecialPower_UnpackReplaceSelf"), false},
		{"587 powers", ix.UnitPowers(587), []string{"SpecialPower_UnpackReplaceSelf"}},
		{"733 selected at 6:02.00", opAt(733, RoleSelect), []string{"6:02.00 "}},
		{"733 first observed at 6:02", fmtFound(ix.FirstObserved(733)), "6:02.00"},
		{"PlayerA's first bomber at 9:10", fmtFound(ix.FirstProduction("PlayerA", "AlliedBomberAircraft")), "9:10.00"},
		{"PlayerB's first bomber at 10:30", fmtFound(ix.FirstProduction("PlayerB", "SovietBomberAircraft")), "10:30.00"},
		{"PlayerB never produced an Allied bomber", fmtFound(ix.FirstProduction("PlayerB", "AlliedBomberAircraft")), "none"},
		{"buildings are built, not produced", fmtFound(ix.FirstProduction("PlayerA", "AlliedPowerPlant")), "none"},
		{"655 produced the first bomber", firstProducer(ix, "PlayerA", "AlliedBomberAircraft"), []int64{655}},
		{"655 acted as producer", ix.ActedAs(655, RoleProducer), true},
		{"655 never built", ix.ActedAs(655, RoleBuilder), false},
		{"246 acted as builder", ix.ActedAs(246, RoleBuilder), true},
		{"587 never built", ix.ActedAs(587, RoleBuilder), false},
		{"680 is PlayerB's", ix.UnitPlayers(680), []string{"PlayerB"}},
		{"246 is PlayerA's", ix.UnitPlayers(246), []string{"PlayerA"}},
		{"512 sold at 14:00", opAt(512, RoleSell), []string{"14:00.00 "}},
		{"246 last observed at its pack", fmtFound(ix.LastObserved(246)), "1:24.00"},
		{"unknown unit not observed", ix.Observed(424242), false},
		{"unknown unit has no players", len(ix.UnitPlayers(424242)), 0},
		{"PlayerA placed 7 buildings", len(ix.Placements("PlayerA")), 7},
		{"an unknown role finds nothing", len(ix.UnitOps(246, "pilot")), 0},
		{"produce identifies", ix.HasRole("PRODUCE", RoleProducer), true},
		{"select does not identify", ix.HasRole("select", RoleBuilder), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !equalAny(tc.got, tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func fmtFound(d time.Duration, ok bool) string {
	if !ok {
		return "none"
	}
	return interceptors.FormatClock(d)
}

func firstProducer(ix *Index, player, asset string) []int64 {
	for _, op := range ix.PlayerOps(player, RoleProducer) {
		if op.Asset == asset {
			return op.Units
		}
	}
	return nil
}

func equalAny(a, b any) bool {
	switch x := a.(type) {
	case []string:
		y, _ := b.([]string)
		return slices.Equal(x, y)
	case []int64:
		y, _ := b.([]int64)
		return slices.Equal(x, y)
	}
	return a == b
}

func TestExtractLineForms(t *testing.T) {
	t.Parallel()
	const log = "0:02.00 Alice 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)\n" +
		"0:09.00 Alice 放置建筑 AlliedPowerPlant [UnitId]246(建造者) @ (1200.0,880.0,12.0)\n" +
		"1:30.10 Alice 选择 [UnitId]587 [UnitId]588\n"
	tests := []struct {
		name    string
		texts   []string
		ops     int
		lines   int
		stated  string
		firstLn int
	}{
		{"LF", []string{log}, 3, 3, "", 1},
		{"CRLF", []string{strings.ReplaceAll(log, "\n", "\r\n")}, 3, 3, "", 1},
		{"trailing and leading blanks", []string{strings.ReplaceAll(log, "\n", "  \t\n  ")}, 3, 4, "", 1},
		{"prose around the log", []string{"Please analyse this replay.\n\n" + log + "\nThanks!"}, 3, 7, "", 3},
		{"no final newline", []string{strings.TrimSuffix(log, "\n")}, 3, 3, "", 1},
		{"several messages continue line numbers", []string{"录像时长: 3:00.00\nhello\n", log}, 3, 5, "3:00.00", 3},
		{"latest stated duration wins", []string{"录像时长: 3:00.00\n录像时长: 2:00.00\n" + log}, 3, 5, "3:00.00", 3},
		{"prose only", []string{"no log here\n选择 is a verb\n"}, 0, 2, "", 0},
		{"empty", []string{""}, 0, 0, "", 0},
		{"no texts", nil, 0, 0, "", 0},
		{"unparsable time is not an op", []string{"1:99.00 Alice 选择 [UnitId]5\n" + log}, 3, 4, "", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ix := extract(t, tc.texts...)
			if ix.Len() != tc.ops || ix.Lines() != tc.lines {
				t.Fatalf("Len, Lines = %d, %d; want %d, %d", ix.Len(), ix.Lines(), tc.ops, tc.lines)
			}
			if ix.HasFacts() != (tc.ops > 0) {
				t.Errorf("HasFacts = %v with %d ops", ix.HasFacts(), tc.ops)
			}
			stated, ok := ix.StatedDuration()
			if (tc.stated != "") != ok || (ok && stated != clock(t, tc.stated)) {
				t.Errorf("StatedDuration = %v, %v; want %q", stated, ok, tc.stated)
			}
			if tc.ops == 0 {
				return
			}
			first := ix.Ops()[0]
			if first.Line != tc.firstLn {
				t.Errorf("first op line = %d, want %d", first.Line, tc.firstLn)
			}
			if first.Text != "0:02.00 Alice 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)" {
				t.Errorf("first op text = %q", first.Text)
			}
			place := ix.Ops()[1]
			if !place.HasPos || place.Pos != [3]float64{1200, 880, 12} || place.Asset != "AlliedPowerPlant" || !slices.Equal(place.Units, []int64{246}) {
				t.Errorf("place op = %+v", place)
			}
			sel := ix.Ops()[2]
			if !slices.Equal(sel.Units, []int64{587, 588}) || sel.Player != "Alice" || sel.At != clock(t, "1:30.10") {
				t.Errorf("select op = %+v", sel)
			}
		})
	}
}

func TestExtractUnparsedValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		line string
	}{
		{"seconds out of range", "1:75.00 Alice 选择 [UnitId]5"},
		{"unit overflows int64", "1:00.00 Alice 出售 [UnitId]99999999999999999999"},
		{"one unit of a selection overflows", "1:00.00 Alice 选择 [UnitId]5 [UnitId]99999999999999999999"},
		{"position with two numbers", "1:00.00 Alice 移动 @ (1.0,2.0)"},
		{"position with four numbers", "1:00.00 Alice 移动 @ (1,2,3,4)"},
		{"position not a number", "1:00.00 Alice 移动 @ (a,b,c)"},
		{"position infinite", "1:00.00 Alice 移动 @ (Inf,0,0)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ix := extract(t, tc.line+"\n0:01.00 Bob 出售 [UnitId]7\n")
			if ix.Len() != 1 || ix.Unparsed() != 1 || ix.Ops()[0].Player != "Bob" {
				t.Fatalf("Len, Unparsed = %d, %d; want the one good line and one unparsed", ix.Len(), ix.Unparsed())
			}
			if ix.Observed(5) {
				t.Error("a unit of a rejected line is observed")
			}
		})
	}
}

// TestExtractUnsortedLog checks that operations come out in time order, in line
// order among equal times, whatever order the log has.
func TestExtractUnsortedLog(t *testing.T) {
	t.Parallel()
	ix := extract(t, "0:10.00 A 出售 [UnitId]1\n0:05.00 A 出售 [UnitId]2\n0:05.00 A 出售 [UnitId]3\n0:01.00 B 出售 [UnitId]4\n")
	var got []int64
	for _, op := range ix.Ops() {
		got = append(got, op.Units[0])
	}
	if want := []int64{4, 2, 3, 1}; !slices.Equal(got, want) {
		t.Errorf("units in order %v, want %v", got, want)
	}
	if want := []string{"A", "B"}; !slices.Equal(ix.Players(), want) {
		t.Errorf("Players = %q, want %q (first appearance in the text)", ix.Players(), want)
	}
	if d, _ := ix.FirstObserved(4); d != time.Second {
		t.Errorf("FirstObserved(4) = %v", d)
	}
}

func TestExtractBounds(t *testing.T) {
	t.Parallel()
	miner := replay(t, "mcv_vs_miner.txt") // 19 lines, ops from line 5
	rules := loadRules(t)
	rules.MaxLines = 10
	byLines, err := NewExtractor(rules)
	if err != nil {
		t.Fatal(err)
	}
	head := strings.SplitAfterN(miner, "\n", 10)
	headBytes := len(strings.Join(head[:9], "")) // the first nine lines with their breaks
	byBytes, err := NewExtractor(loadRules(t), WithMaxBytes(headBytes))
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		x         *Extractor
		text      string
		lines     int
		ops       int
		truncated bool
	}{
		{"within both bounds", ra3(t), miner, 19, 15, false},
		{"line bound", byLines, miner, 10, 6, true},
		{"line bound exactly met", byLines, strings.Join(head[:9], "") + strings.SplitAfterN(head[9], "\n", 2)[0], 10, 6, false},
		{"byte bound stops before the line that crosses it", byBytes, miner, 9, 5, true},
		{"byte bound counts trimmed lines", byBytes, strings.ReplaceAll(strings.Join(head[:9], ""), "\n", "   \r\n"), 9, 5, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ix, err := tc.x.Extract(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if ix.Lines() != tc.lines || ix.Len() != tc.ops || ix.Truncated() != tc.truncated {
				t.Fatalf("Lines, Len, Truncated = %d, %d, %v; want %d, %d, %v", ix.Lines(), ix.Len(), ix.Truncated(), tc.lines, tc.ops, tc.truncated)
			}
			for _, op := range ix.Ops() {
				if op.Line > tc.lines {
					t.Errorf("op from line %d past the bound: %q", op.Line, op.Text)
				}
			}
		})
	}
}

// TestExtractFiftyMegabytes feeds 50 MB — prose with an op line in every block —
// and checks the documented rule: reading stops before the first line that would
// pass the 16 MiB default byte bound; everything before it is extracted.
func TestExtractFiftyMegabytes(t *testing.T) {
	t.Parallel()
	var block strings.Builder
	block.WriteString("0:01.00 Alice 选择 [UnitId]1 [UnitId]2\n")
	for range 40 {
		block.WriteString("some prose the application wrote around the log, 选择 and all\n")
	}
	blockLines := 41
	n := 50_000_000/block.Len() + 1
	text := strings.Repeat(block.String(), n)

	ix := extract(t, text)
	fullBlocks := DefaultMaxBytes / block.Len()
	// Lines of the partial block that still fit: the op line first, then prose.
	rest := DefaultMaxBytes - fullBlocks*block.Len()
	wantLines, wantOps := fullBlocks*blockLines, fullBlocks
	for _, l := range strings.SplitAfter(block.String(), "\n") {
		if len(l) == 0 || len(l) > rest {
			break
		}
		rest -= len(l)
		wantLines++
		if strings.HasPrefix(l, "0:01.00") {
			wantOps++
		}
	}
	if !ix.Truncated() || ix.Lines() != wantLines || ix.Len() != wantOps {
		t.Fatalf("Truncated, Lines, Len = %v, %d, %d; want true, %d, %d", ix.Truncated(), ix.Lines(), ix.Len(), wantLines, wantOps)
	}
	if got := ix.UnitOps(2, RoleSelect); len(got) != wantOps {
		t.Errorf("unit 2 selected %d times, want %d", len(got), wantOps)
	}

	huge := strings.Repeat("x", 50_000_000)
	ix = extract(t, "0:01.00 Alice 出售 [UnitId]1\n"+huge)
	if !ix.Truncated() || ix.Len() != 1 || ix.Lines() != 1 {
		t.Errorf("one 50 MB line: Truncated, Len, Lines = %v, %d, %d; want true, 1, 1", ix.Truncated(), ix.Len(), ix.Lines())
	}
}

func TestExtractLongLineIsNoOp(t *testing.T) {
	t.Parallel()
	units := strings.Repeat(" [UnitId]12345", MaxLineBytes/14+1)
	ix := extract(t, "0:01.00 Alice 选择"+units+"\n0:02.00 Alice 出售 [UnitId]7\n")
	if ix.Len() != 1 || ix.Lines() != 2 || ix.Observed(12345) {
		t.Errorf("Len, Lines, Observed(12345) = %d, %d, %v; want 1, 2, false", ix.Len(), ix.Lines(), ix.Observed(12345))
	}
}

func TestExtractGarbage(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name string
		text string
	}{
		{"random bytes", randomBytes(rng, 1<<20, 256)},
		{"random digits, colons and brackets", randomFrom(rng, 1<<20, "0123456789:. []()@,\n选择UnitId")},
		{"NUL bytes", strings.Repeat("\x00", 4096)},
		{"invalid UTF-8", strings.Repeat("\xff\xfe\xc3", 4096)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ix := extract(t, tc.text)
			if ix.HasFacts() || ix.End() != 0 || len(ix.Players()) != 0 {
				t.Errorf("garbage gave %d ops, end %v, players %q", ix.Len(), ix.End(), ix.Players())
			}
		})
	}
}

func randomBytes(rng *rand.Rand, n, alphabet int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(alphabet))
	}
	return string(b)
}

func randomFrom(rng *rand.Rand, n int, alphabet string) string {
	rs := []rune(alphabet)
	var b strings.Builder
	for b.Len() < n {
		b.WriteRune(rs[rng.IntN(len(rs))])
	}
	return b.String()
}

// TestPrefilterKeepsResults runs the fixtures with every rule's prefilter literal
// removed and compares: the prefilter may only save time, never change facts.
func TestPrefilterKeepsResults(t *testing.T) {
	t.Parallel()
	plain := *ra3(t)
	plain.ops = slices.Clone(plain.ops)
	for i := range plain.ops {
		if len(plain.ops[i].literals) == 0 {
			t.Errorf("rule %s has no prefilter literal", plain.ops[i].kind)
		}
		plain.ops[i].literals = nil
	}
	for _, name := range replayNames {
		if strings.Contains(name, "large") {
			continue
		}
		text := replay(t, name)
		a, b := extract(t, text), must(plain.Extract(text))
		if !slices.EqualFunc(a.Ops(), b.Ops(), opsEqual) {
			t.Errorf("%s: prefilter changed the operations", name)
		}
	}
}

func must(ix *Index, err error) *Index {
	if err != nil {
		panic(err)
	}
	return ix
}

func opsEqual(a, b Op) bool {
	return a.Kind == b.Kind && a.At == b.At && a.Player == b.Player && a.Asset == b.Asset &&
		a.Power == b.Power && slices.Equal(a.Units, b.Units) && a.Pos == b.Pos &&
		a.HasPos == b.HasPos && a.Line == b.Line && a.Text == b.Text
}

func TestExtractorNotFromNewExtractor(t *testing.T) {
	t.Parallel()
	var zero Extractor
	if _, err := zero.Extract("0:01.00 A 出售 [UnitId]1"); err == nil {
		t.Error("zero Extractor extracted without an error")
	}
	var nilX *Extractor
	if _, err := nilX.Extract("x"); err == nil {
		t.Error("nil Extractor extracted without an error")
	}
}

// TestParseNumberMatchesStrconv checks the position fast path against strconv on
// the forms the log and models write, and on forms that must go the slow way.
func TestParseNumberMatchesStrconv(t *testing.T) {
	t.Parallel()
	inputs := []string{"0", "0.0", "1204.5", "1204.50", "880", "-12.25", "+3.5", "0.1", "0.3",
		"123456789012345", "1234567890123456", "99999999999999999999", "1e3", ".5", "5.",
		"0.000000000000001", "-0", "1_000", "0x10", "", "-", ".", "1..2", "NaN", "Inf", "1.2.3"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		inputs = append(inputs, strconv.FormatFloat(rng.Float64()*20000-10000, 'f', rng.IntN(8), 64))
	}
	for _, in := range inputs {
		want, err := strconv.ParseFloat(in, 64)
		wantOK := err == nil && !math.IsNaN(want) && !math.IsInf(want, 0)
		got, ok := parseNumber(in)
		if ok != wantOK || (ok && got != want) {
			t.Errorf("parseNumber(%q) = %v, %v; strconv says %v, %v", in, got, ok, want, wantOK)
		}
	}
}
