package facts

import (
	"slices"
	"strings"
	"testing"
)

// TestMergeSegmentsAnswerLikeWhole checks the session fixture: the three parts of
// allied_vs_soviet.txt hold exactly its operation lines (verified with diff), so
// merged they must answer every lookup like the whole file — except the stated
// duration, which only the whole file's header carries.
func TestMergeSegmentsAnswerLikeWhole(t *testing.T) {
	t.Parallel()
	whole := extractReplay(t, "allied_vs_soviet.txt")
	parts := []*Index{
		extractReplay(t, "allied_vs_soviet.part1.txt"),
		extractReplay(t, "allied_vs_soviet.part2.txt"),
		extractReplay(t, "allied_vs_soviet.part3.txt"),
	}
	merged := Merge(parts...)

	if merged.Len() != whole.Len() {
		t.Fatalf("merged %d ops, whole %d", merged.Len(), whole.Len())
	}
	for i, op := range merged.Ops() {
		w := whole.Ops()[i]
		if op.Text != w.Text || op.At != w.At || op.Kind != w.Kind || !slices.Equal(op.Units, w.Units) {
			t.Fatalf("op %d: merged %q, whole %q", i, op.Text, w.Text)
		}
	}
	if _, ok := merged.StatedDuration(); ok {
		t.Error("the parts state no duration, the merge does")
	}
	if got, want := merged.End(), clock(t, "14:30.73"); got != want {
		t.Errorf("merged End = %v, want the last op %v", got, want)
	}
	if merged.Lines() != 151+139+123 {
		t.Errorf("merged Lines = %d, want the parts' sum", merged.Lines())
	}
	// Line numbers count over the parts taken as one text: the first op of part 2
	// is line 5 of part 2.
	if op, ok := merged.Match(ev(t, "build", "5:00.00", "SovietAirfield", "700"), 0); !ok || op.Line != 151+5 {
		t.Errorf("part 2's first op: %v, %v; want line %d", op, ok, 151+5)
	}

	if !slices.Equal(merged.Players(), whole.Players()) || !slices.Equal(merged.Units(), whole.Units()) {
		t.Fatalf("players %q / units differ from the whole", merged.Players())
	}
	for _, u := range whole.Units() {
		wf, _ := whole.FirstObserved(u)
		mf, _ := merged.FirstObserved(u)
		wl, _ := whole.LastObserved(u)
		ml, _ := merged.LastObserved(u)
		if wf != mf || wl != ml || !slices.Equal(whole.UnitPlayers(u), merged.UnitPlayers(u)) ||
			!slices.Equal(whole.UnitPowers(u), merged.UnitPowers(u)) ||
			whole.ActedAs(u, RoleBuilder) != merged.ActedAs(u, RoleBuilder) ||
			whole.ActedAs(u, RoleProducer) != merged.ActedAs(u, RoleProducer) {
			t.Errorf("unit %d answers differently merged", u)
		}
	}
	if at, ok := merged.FirstProduction("PlayerA", "AlliedBomberAircraft"); !ok || at != clock(t, "9:10.00") {
		t.Errorf("merged FirstProduction = %v, %v", at, ok)
	}

	// Case c17: the answer to part 3 cites 246, seen only in part 1.
	if parts[2].UsedPower(246, "SpecialPower_PackReplaceSelf") || parts[2].ActedAs(246, RoleBuilder) {
		t.Error("part 3 alone knows 246")
	}
	if !merged.UsedPower(246, "SpecialPower_PackReplaceSelf") || !merged.ActedAs(246, RoleBuilder) {
		t.Error("the merged session does not know 246's pack and builds")
	}
}

func TestMergeDuplicates(t *testing.T) {
	t.Parallel()
	whole := replay(t, "allied_vs_soviet.txt")
	lines := strings.SplitAfter(whole, "\n")
	header, ops := strings.Join(lines[:5], ""), lines[5:]
	seg := func(from, to int) *Index { return extract(t, header+strings.Join(ops[from:to], "")) }
	wholeIx := extract(t, whole)
	n := len(ops)

	tests := []struct {
		name string
		segs []*Index
		want int
	}{
		{"overlapping segments", []*Index{seg(0, 200), seg(150, 300), seg(250, n)}, wholeIx.Len()},
		{"a segment sent twice", []*Index{seg(0, 200), seg(0, 200), seg(200, n)}, wholeIx.Len()},
		{"segments out of order", []*Index{seg(200, n), seg(0, 200)}, wholeIx.Len()},
		{"nested segment", []*Index{seg(0, n), seg(100, 120)}, wholeIx.Len()},
		{"repeats within a segment are kept", []*Index{extract(t, "0:01.00 A 出售 [UnitId]1\n0:01.00 A 出售 [UnitId]1\n"), extract(t, "0:01.00 A 出售 [UnitId]1\n")}, 2},
		{"nil segments skipped", []*Index{nil, seg(0, n), nil}, wholeIx.Len()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := Merge(tc.segs...)
			if m.Len() != tc.want {
				t.Fatalf("merged %d ops, want %d", m.Len(), tc.want)
			}
			if !slices.IsSortedFunc(m.recs, cmpOpTime) {
				t.Error("merged ops not in time order")
			}
			if tc.want == wholeIx.Len() {
				for i, op := range m.Ops() {
					if op.Text != wholeIx.Ops()[i].Text {
						t.Fatalf("op %d = %q, want %q", i, op.Text, wholeIx.Ops()[i].Text)
					}
				}
				if m.End() != wholeIx.End() {
					t.Errorf("End = %v, want %v (every segment states the duration)", m.End(), wholeIx.End())
				}
			}
		})
	}
}

func TestMergeIncremental(t *testing.T) {
	t.Parallel()
	a, b, c := extractReplay(t, "allied_vs_soviet.part1.txt"), extractReplay(t, "allied_vs_soviet.part2.txt"), extractReplay(t, "allied_vs_soviet.part3.txt")
	sameAnswers(t, Merge(a, b, c), Merge(Merge(a, b), c))
	if Merge(a) != a {
		t.Error("Merge of one index does not return it")
	}
	empty := Merge()
	if empty.HasFacts() || empty.End() != 0 {
		t.Error("Merge of nothing has facts")
	}
}

func TestMergeLatestStatedDuration(t *testing.T) {
	t.Parallel()
	m := Merge(extract(t, "录像时长: 5:00.00\n0:01.00 A 出售 [UnitId]1"), extract(t, "录像时长: 9:00.00\n0:02.00 A 出售 [UnitId]2"), extract(t, "0:03.00 A 出售 [UnitId]3"))
	if d, ok := m.StatedDuration(); !ok || d != clock(t, "9:00.00") || m.End() != d {
		t.Errorf("StatedDuration, End = %v, %v, %v; want 9:00.00", d, ok, m.End())
	}
}
