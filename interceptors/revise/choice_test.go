package revise

import (
	"strconv"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
)

// TestTheDeliveredAttemptIsTheBestByRank checks the order the delivered attempt
// is chosen by (Rank): Fatal, then Contradictions with each new one weighing
// NewContradictionWeight, then Warnings, then WeakEvidence; the earlier attempt
// on a tie.
func TestTheDeliveredAttemptIsTheBestByRank(t *testing.T) {
	t.Parallel()
	contradicted := func(id int) unit {
		return unit{id: id, claim: "AlliedTankA", level: "possible", evidence: []string{"select|1:00.00|" + itoa(id)}, alternatives: []string{"AlliedTankB"}}
	}
	fixed := func(id int) unit {
		return unit{id: id, claim: "AlliedTankB", level: "possible", evidence: []string{"select|1:00.00|" + itoa(id)}, alternatives: []string{"AlliedTankA"}}
	}
	sound := func(id int) unit {
		return unit{id: id, claim: "AlliedSound", level: "possible", evidence: []string{"select|1:00.00|" + itoa(id)}, alternatives: []string{"AlliedTankA"}}
	}
	// A claim the draft had right, broken by a revision (the same claim, so it is
	// not dropped, now contradicted): a new Contradiction.
	broken := func(id int) unit {
		return unit{id: id, claim: "AlliedSound", level: "confirmed", evidence: []string{"select|1:00.00|" + itoa(id)}}
	}
	warned := unit{id: 150, claim: "AlliedWarned", level: "possible", evidence: []string{"select|1:00.00|150"}, alternatives: []string{"AlliedTankA"}}
	rules := map[string]rule{"150 AlliedWarned": {code: "fake.warning", severity: interceptors.Warning}}
	for id := 100; id < 120; id++ {
		rules[itoa(id)+" AlliedTankA"] = rule{code: "fake.contradiction", severity: interceptors.Contradiction, rec: interceptors.Recommendation{EvidenceLevel: "ruled out"}}
		rules[itoa(id)+" AlliedSound"] = rule{code: "fake.contradiction", severity: interceptors.Contradiction, confident: true, rec: interceptors.Recommendation{EvidenceLevel: "ruled out"}}
	}
	tests := []struct {
		name      string
		draft     []unit
		revisions [][]unit
		want      int // the attempt delivered (0: the draft)
	}{
		{name: "fixes 3, breaks 1: 1 + 2 = 3 beats 4",
			draft:     []unit{contradicted(101), contradicted(102), contradicted(103), contradicted(104), sound(105)},
			revisions: [][]unit{{fixed(101), fixed(102), fixed(103), contradicted(104), broken(105)}}, want: 1},
		{name: "fixes 2, breaks 1: 2 + 2 = 4 ties with 4, the draft is earlier",
			draft:     []unit{contradicted(101), contradicted(102), contradicted(103), contradicted(104), sound(105)},
			revisions: [][]unit{{fixed(101), fixed(102), contradicted(103), contradicted(104), broken(105)}}, want: 0},
		{name: "fixes 1, breaks 1: 1 + 2 = 3 loses to 2",
			draft:     []unit{contradicted(101), contradicted(102), sound(105)},
			revisions: [][]unit{{fixed(101), contradicted(102), broken(105)}}, want: 0},
		{name: "fixes all 3, breaks 1: 0 + 2 = 2 beats 3",
			draft:     []unit{contradicted(101), contradicted(102), contradicted(103), sound(105)},
			revisions: [][]unit{{fixed(101), fixed(102), fixed(103), broken(105)}}, want: 1},
		{name: "a worse revision, then a better one revised from it",
			draft:     []unit{contradicted(101), contradicted(102), sound(105), sound(106)},
			revisions: [][]unit{{contradicted(101), contradicted(102), broken(105), broken(106)}, {fixed(101), contradicted(102), sound(105), sound(106)}}, want: 2},
		{name: "a Warning instead of a Contradiction",
			draft:     []unit{contradicted(101), sound(105)},
			revisions: [][]unit{{fixed(101), sound(105), warned}}, want: 1},
		{name: "a Contradiction the draft had is not new when its claim moved",
			draft:     []unit{contradicted(101), contradicted(102), contradicted(103)},
			revisions: [][]unit{{contradicted(103), fixed(101), fixed(102)}}, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prose := func(n int) string { return "attempt " + itoa(n) + "." }
			var replies []reply
			for i, r := range tc.revisions {
				replies = append(replies, reply{content: answer(prose(i+1), r...)})
			}
			f := newFixture(t, setup{cfg: &Config{MaxRevisions: intp(len(tc.revisions))}, draft: answer(prose(0), tc.draft...), rules: rules, replies: replies})
			f.run(t)
			if got := f.ex.Response.Content(); !strings.HasPrefix(got, prose(tc.want)) {
				t.Errorf("delivered:\n%s\nwant attempt %d", got, tc.want)
			}
			var final *interceptors.FinalOutcome
			var attempts []interceptors.Attempt
			f.ex.Trace.Do(func(tr *interceptors.Trace) { final, attempts = tr.Final, tr.Attempts })
			if final == nil || final.Attempt != tc.want {
				t.Errorf("the trace's final = %+v, want attempt %d", final, tc.want)
			}
			if len(attempts) != len(tc.revisions)+1 {
				t.Errorf("%d attempts, want %d", len(attempts), len(tc.revisions)+1)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestRankOrder pins the order itself.
func TestRankOrder(t *testing.T) {
	t.Parallel()
	counts := func(f, c, w, e, i int) interceptors.SeverityCounts {
		var s interceptors.SeverityCounts
		s[interceptors.Fatal], s[interceptors.Contradiction], s[interceptors.Warning], s[interceptors.WeakEvidence], s[interceptors.Info] = f, c, w, e, i
		return s
	}
	tests := []struct {
		name   string
		a, b   Rank
		better bool // a beats b
	}{
		{"fewer Fatal first", AttemptRank(counts(0, 9, 9, 9, 0), 9, false, false), AttemptRank(counts(1, 0, 0, 0, 0), 0, false, false), true},
		{"a new Contradiction weighs 2", AttemptRank(counts(0, 2, 0, 0, 0), 1, false, false), AttemptRank(counts(0, 3, 0, 0, 0), 0, false, false), false},
		{"fixing more than twice what it breaks wins", AttemptRank(counts(0, 2, 0, 0, 0), 1, false, false), AttemptRank(counts(0, 4, 0, 0, 0), 0, false, false), true},
		{"Contradictions before Warnings", AttemptRank(counts(0, 0, 5, 0, 0), 0, false, false), AttemptRank(counts(0, 1, 0, 0, 0), 0, false, false), true},
		{"Warnings before WeakEvidence", AttemptRank(counts(0, 0, 0, 5, 0), 0, false, false), AttemptRank(counts(0, 0, 1, 0, 0), 0, false, false), true},
		{"Info does not count", AttemptRank(counts(0, 0, 0, 0, 7), 0, false, false), AttemptRank(counts(0, 0, 0, 0, 0), 0, false, false), false},
		{"an excluded attempt loses to any eligible one", AttemptRank(counts(0, 0, 0, 0, 0), 0, true, false), AttemptRank(counts(1, 5, 0, 0, 0), 0, false, false), false},
		{"a leaking attempt loses to any that does not leak", AttemptRank(counts(0, 0, 1, 0, 0), 0, false, true), AttemptRank(counts(1, 5, 0, 0, 0), 0, false, false), false},
	}
	for _, tc := range tests {
		if got := tc.a.Compare(tc.b) < 0; got != tc.better {
			t.Errorf("%s: %v better than %v = %v, want %v", tc.name, tc.a, tc.b, got, tc.better)
		}
	}
	if AttemptRank(counts(0, 0, 0, 0, 3), 0, false, false).Compare(AttemptRank(counts(0, 0, 0, 0, 0), 0, false, false)) != 0 {
		t.Error("Info counts differ, and the ranks are not a tie")
	}
}
