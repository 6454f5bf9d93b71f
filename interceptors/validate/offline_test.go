package validate

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// TestSessionNeedsItsMergedFacts: c17's answer cites 246, seen only in part 1.
// Against the merged session nothing is wrong; against part 3 alone the rules
// that the merge keeps quiet do fire.
func TestSessionNeedsItsMergedFacts(t *testing.T) {
	t.Parallel()
	off := newOffline(t, Config{})
	var c17 fixtureCase
	for _, c := range loadCases(t) {
		if c.ID == "c17_session_segments" {
			c17 = c
		}
	}
	segs := c17.segments(t)
	if len(segs) != 3 {
		t.Fatalf("c17 has %d segments", len(segs))
	}
	rep, err := off.Check(CheckRequest{Facts: segs[2:], Answer: c17.Answer})
	if err != nil {
		t.Fatal(err)
	}
	got := keys(rep.Issues, interceptors.WeakEvidence)
	for _, want := range []string{"power.not_used|Contradiction|unitClaims[0].evidence[0]", "builder.not_observed|WeakEvidence|unitClaims[0]"} {
		if !slices.Contains(got, want) {
			t.Errorf("part 3 alone: %s missing from %v", want, got)
		}
	}
	merged, err := off.Check(CheckRequest{Facts: segs, Answer: c17.Answer})
	if err != nil {
		t.Fatal(err)
	}
	if merged.Segments != 3 || merged.Operations <= rep.Operations {
		t.Errorf("merged report: %d segments, %d operations (part 3 alone: %d)", merged.Segments, merged.Operations, rep.Operations)
	}
}

func TestOfflineRefusesWhatItCannotCheck(t *testing.T) {
	t.Parallel()
	off := newOffline(t, Config{})
	// 50 MB of well-formed operation lines: refused with the limit named, not cut.
	line := "0:05.20 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)\n"
	huge := strings.Repeat(line, 50<<20/len(line)+1)
	tooMany := make([]string, MaxSegments+1)
	for _, tc := range []struct {
		name   string
		req    CheckRequest
		status int
		code   string
		says   string
	}{
		{"50 MB of facts", CheckRequest{Facts: []string{huge}, Answer: "x"}, 413, "facts_too_large", "16 MiB"},
		{"two segments over the bound together", CheckRequest{Facts: []string{huge[:10<<20], huge[:10<<20]}, Answer: "x"}, 413, "facts_too_large", "all segments together"},
		{"too many segments", CheckRequest{Facts: tooMany, Answer: "x"}, 400, "too_many_segments", "at most 64"},
		{"unknown knowledge set", CheckRequest{Facts: []string{testLog}, Answer: "x", KnowledgeSet: "ra4"}, 400, "unknown_knowledge_set", `"ra4"`},
		{"a set of a pack without facts", CheckRequest{Facts: []string{testLog}, Answer: "x", KnowledgeSet: "dnd"}, 400, "unknown_pack", "dnd"},
		{"a set of another pack than the one named", CheckRequest{Facts: []string{testLog}, Answer: "x", Pack: "ra3", KnowledgeSet: "dnd"}, 400, "knowledge_set_mismatch", "dnd"},
		{"unknown pack", CheckRequest{Facts: []string{testLog}, Answer: "x", Pack: "chess"}, 400, "unknown_pack", "chess"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := off.Check(tc.req)
			e := interceptors.AsError(err)
			if e == nil {
				t.Fatalf("want an error, got %v (report %v)", err, rep != nil)
			}
			if e.Status != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.says) {
				t.Fatalf("got %d %s %q; want %d %s mentioning %q", e.Status, e.Code, e.Message, tc.status, tc.code, tc.says)
			}
		})
	}
}

func TestOfflineContext(t *testing.T) {
	t.Parallel()
	off := newOffline(t, Config{})
	// Blue's 420 unpacks. As 盟军 (the header), an aircraft claim contradicts the
	// facts; with the factions swapped, Blue plays 神州, where the asset is unknown
	// and no asset carries the power, so there is nothing to contradict.
	corona := replayText(t, "corona_celestial_vs_allied.txt")
	ans := answer(unitClaims(unit("420", "Blue", "AlliedFighterAircraft", "possible", "power|2:10.00|SpecialPower_UnpackReplaceSelf|420")))
	for _, tc := range []struct {
		name    string
		req     CheckRequest
		set     string
		players string
		want    []string
	}{
		{"the header selects ra3-corona and the factions", CheckRequest{Facts: []string{corona}, Answer: ans},
			"ra3-corona", "青龙 (神州), Blue (盟军)", []string{"asset.power_mismatch|Contradiction|unitClaims[0]"}},
		{"factions given in player order replace the header's", CheckRequest{Facts: []string{corona}, Answer: ans, Scopes: knowledge.Scopes{"factions": {"盟军", "神州"}}},
			"ra3-corona", "青龙 (盟军), Blue (神州)", []string{"asset.unknown|Warning|unitClaims[0]"}},
		{"a set named by the request", CheckRequest{Facts: []string{corona}, Answer: ans, KnowledgeSet: "ra3"},
			"ra3", "青龙 (神州), Blue (盟军)", []string{"asset.power_mismatch|Contradiction|unitClaims[0]"}},
		{"no header: the log's players take the factions in order", CheckRequest{Facts: []string{dropHeader(corona)}, Answer: ans, Scopes: knowledge.Scopes{"factions": {"神州", "盟军"}}},
			"ra3", "青龙 (神州), Blue (盟军)", []string{"asset.power_mismatch|Contradiction|unitClaims[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := off.Check(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var players []string
			for _, p := range rep.Players {
				players = append(players, p.Name+" ("+p.Scope+")")
			}
			if rep.KnowledgeSet != tc.set || strings.Join(players, ", ") != tc.players {
				t.Errorf("context: set %s, players %v", rep.KnowledgeSet, players)
			}
			if got := keys(rep.Issues, interceptors.Info); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// dropHeader removes the header lines (everything before the first operation).
func dropHeader(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if l != "" && l[0] >= '0' && l[0] <= '9' {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestCheckOutput pins the output formats against a fixture case.
func TestCheckOutput(t *testing.T) {
	t.Parallel()
	off := newOffline(t, Config{})
	var c02 fixtureCase
	for _, c := range loadCases(t) {
		if c.ID == "c02_mcv_overconfident" {
			c02 = c
		}
	}
	rep, err := off.Check(CheckRequest{Facts: c02.segments(t), Answer: c02.Answer})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Issues []map[string]json.RawMessage `json:"issues"`
	}
	raw := MarshalIssues(rep.Issues)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Issues) != 2 {
		t.Fatalf("%s", raw)
	}
	for _, is := range out.Issues {
		var fields []string
		for k := range is {
			fields = append(fields, k)
		}
		slices.Sort(fields)
		if !slices.Equal(fields, []string{"code", "message", "path", "recommendation", "severity"}) {
			t.Fatalf("issue fields %v, want exactly code, severity, path, message, recommendation", fields)
		}
	}
	var amb struct {
		Code, Severity, Path string
		Recommendation       struct {
			EvidenceLevel string   `json:"evidenceLevel"`
			Alternatives  []string `json:"alternatives"`
			Text          string   `json:"text"`
		}
	}
	if err := json.Unmarshal(out.Issues[1]["recommendation"], &amb.Recommendation); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(out.Issues[1]["code"], &amb.Code)
	_ = json.Unmarshal(out.Issues[1]["severity"], &amb.Severity)
	if amb.Code != "evidence.ambiguous" || amb.Severity != "WeakEvidence" || amb.Recommendation.EvidenceLevel != "possible" ||
		!slices.Equal(amb.Recommendation.Alternatives, []string{"AlliedMiner"}) || amb.Recommendation.Text == "" {
		t.Fatalf("second issue %+v in %s", amb, raw)
	}
	if string(MarshalIssues(nil)) != `{"issues":[]}` {
		t.Fatalf("no issues: %s", MarshalIssues(nil))
	}

	var text strings.Builder
	if err := WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 2 issue lines and a summary:\n%s", text.String())
	}
	if f := strings.Fields(lines[0]); f[0] != "WeakEvidence" || f[1] != "builder.not_observed" || f[2] != "unitClaims[0]" {
		t.Errorf("first line %q", lines[0])
	}
	if !strings.HasPrefix(lines[2], "2 issues (E2); knowledge set ra3; players Alice (盟军)") {
		t.Errorf("summary %q", lines[2])
	}
	if Failing(rep.Issues) {
		t.Error("WeakEvidence issues fail the check")
	}
}
