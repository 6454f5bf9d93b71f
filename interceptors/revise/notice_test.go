package revise

import (
	"maps"
	"net/url"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/knowledge"
)

func TestPercentEncodedNoticeReadsBack(t *testing.T) {
	t.Parallel()
	text := "⚠ 以下判断与录像不符，未能修正：\n- “UnitId 733 是 AlliedBomberAircraft”：a+b, c:d 100% ~ok_-."
	enc := percentEncode(text)
	if strings.ContainsAny(enc, " ,:+\n") {
		t.Fatalf("the value %q holds a character a header list or a query decoder would misread", enc)
	}
	for name, decode := range map[string]func(string) (string, error){"PathUnescape": url.PathUnescape, "QueryUnescape": url.QueryUnescape} {
		if got, err := decode(enc); err != nil || got != text {
			t.Errorf("%s = %q, %v; want the notice back", name, got, err)
		}
	}
	one, cut := noticeHeader([]*interceptors.Notice{{Choice: 0, Text: text}}, false)
	if one != enc || cut {
		t.Errorf("one choice: %q (cut %v), want the encoded text alone", one, cut)
	}
	two, _ := noticeHeader([]*interceptors.Notice{{Choice: 0, Text: "a b"}, {Choice: 2, Text: "c"}}, true)
	if two != "0:a%20b,2:c" {
		t.Errorf("several choices: %q, want 0:a%%20b,2:c", two)
	}
}

func TestNoticeHeaderIsBounded(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := range 60 {
		lines = append(lines, strings.Repeat("证", 10)+"第"+string(rune('A'+i%26))+"行")
	}
	text := strings.Join(lines, "\n")
	for _, tc := range []struct {
		name     string
		notices  []*interceptors.Notice
		several  bool
		maxParts int
	}{
		{"one long notice", []*interceptors.Notice{{Text: text}}, false, 1},
		{"two long notices", []*interceptors.Notice{{Choice: 0, Text: text}, {Choice: 1, Text: text}}, true, 2},
		{"one line longer than the bound", []*interceptors.Notice{{Text: strings.Repeat("证", 2000)}}, false, 1},
	} {
		value, cut := noticeHeader(tc.notices, tc.several)
		if !cut || len(value) > MaxNoticeHeader {
			t.Errorf("%s: %d bytes (cut %v), want at most %d and cut", tc.name, len(value), cut, MaxNoticeHeader)
		}
		for _, part := range strings.Split(value, ",") {
			if tc.several {
				_, part, _ = strings.Cut(part, ":")
			}
			got, err := url.PathUnescape(part)
			if err != nil || !strings.HasSuffix(got, "\n…") {
				t.Errorf("%s: a part decodes to %q (%v), want lines of the notice and a last line …", tc.name, got, err)
				continue
			}
			kept := strings.TrimSuffix(got, "\n…")
			if kept == "" || !strings.HasPrefix(tc.notices[0].Text, kept) {
				t.Errorf("%s: %q is not the notice's beginning", tc.name, kept)
			}
		}
	}
}

func TestNoticeGoesAfterTheTextBeforeTheClaimsBlock(t *testing.T) {
	t.Parallel()
	ra3, _ := packs(t)
	r, err := New(nil, interceptors.Deps{Route: "ra3", Pack: ra3}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	block := "```json\n{\"unitClaims\": [], \"eventClaims\": [], \"timelineClaims\": []}\n```\n"
	for _, tc := range []struct{ name, content, want, stripped string }{
		{"block kept", "正文。\n\n" + marker + "\n" + block, "正文。\n\n⚠ 注意\n\n" + marker + "\n" + block, "正文。\n\n⚠ 注意\n"},
		{"decorated marker line", "正文。\n\n**" + marker + "**\n" + block, "正文。\n\n⚠ 注意\n\n**" + marker + "**\n" + block, "正文。\n\n⚠ 注意\n"},
		{"no block, final line break kept", "正文。\n", "正文。\n\n⚠ 注意\n", "正文。\n\n⚠ 注意\n"},
		{"no block, no line break", "正文。", "正文。\n\n⚠ 注意", "正文。\n\n⚠ 注意"},
		{"nothing but the block", marker + "\n" + block, "⚠ 注意\n\n" + marker + "\n" + block, "⚠ 注意\n"},
	} {
		got := r.placeNotice(nil, tc.content, "⚠ 注意")
		if got != tc.want {
			t.Errorf("%s:\n%q\nwant\n%q", tc.name, got, tc.want)
		}
		if strings.Contains(tc.content, block) && !r.parser.Parse(got, claims.Optional).Usable() {
			t.Errorf("%s: the block no longer parses after the notice", tc.name)
		}
		if s := r.stripClaims(got); s != tc.stripped {
			t.Errorf("%s: stripped %q, want the text and the notice %q", tc.name, s, tc.stripped)
		}
	}
}

func TestDowngradeActsOnWhatItCanFix(t *testing.T) {
	t.Parallel()
	ra3, _ := packs(t)
	r, err := New(nil, interceptors.Deps{Route: "ra3", Pack: ra3}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	content := "正文。\n\n" + marker + "\n```json\n" + `{"unitClaims": [
  {"unitId": 900, "player": "PlayerA", "claim": "AlliedAntiInfantryInfantry", "evidenceLevel": "possible", "evidence": ["select|1:06.39|900"]},
  {"unitId": 944, "player": "PlayerA", "claim": "SovietAntiAirShip", "evidenceLevel": "possible", "evidence": ["select|6:04.23|944"], "alternatives": ["X"]},
  {"unitId": 587, "player": "PlayerA", "claim": "AlliedMCV", "evidenceLevel": "confirmed", "evidence": "power|1:41.00|SpecialPower_ChronoSwap|587"}
], "eventClaims": [{"claim": "PlayerA 打包", "evidenceLevel": "confirmed", "evidence": ["power|1:24.00|SpecialPower_PackReplaceSelf|246", "power|15:24.00|SpecialPower_PackReplaceSelf|246"]}], "timelineClaims": []}` + "\n```\n"
	issues := []interceptors.Issue{
		{Code: "claim.no_alternatives", Severity: interceptors.Warning, Path: "unitClaims[0]", Message: "没有候选。", Args: map[string]string{"unit": "900", "claim": "AlliedAntiInfantryInfantry"}},
		{Code: "asset.unknown", Severity: interceptors.Warning, Path: "unitClaims[1]", Message: "不是该阵营的资产。", Recommendation: interceptors.Recommendation{Remove: true}},
		{Code: "power.not_used", Severity: interceptors.Contradiction, Path: "unitClaims[2].evidence[0]", Message: "从未使用过。",
			Recommendation: interceptors.Recommendation{EvidenceLevel: "uncertain"}, Args: map[string]string{"unit": "587", "power": "SpecialPower_ChronoSwap", "evidence": "power|1:41.00|SpecialPower_ChronoSwap|587"}},
		{Code: "evidence.out_of_range", Severity: interceptors.Contradiction, Path: "eventClaims[0].evidence[1]", Message: "晚于录像结束。",
			Recommendation: interceptors.Recommendation{EvidenceLevel: "uncertain"}, Args: map[string]string{"evidence": "power|15:24.00|SpecialPower_PackReplaceSelf|246", "end": "14:32.40"}},
		{Code: "claims.truncated", Severity: interceptors.Info, Path: "unitClaims"},
	}
	out, done, notes := r.downgrade(content, issues, DefaultThreshold)
	if len(notes) > 0 {
		t.Fatalf("notes: %v", notes)
	}
	c := r.parser.Parse(out, claims.Optional)
	if !c.Usable() {
		t.Fatalf("the downgraded block does not parse:\n%s", out)
	}
	hedged := c.UnitClaims[0]
	if hedged.Level != claims.Possible || len(hedged.NeedsConfirmation) != 1 || !strings.Contains(hedged.NeedsConfirmation[0], "UnitId 900") {
		t.Errorf("claim.no_alternatives below the threshold: %v %q, want possible with the pack's confirm text", hedged.Level, hedged.NeedsConfirmation)
	}
	// asset.unknown recommends removing the claim: the claims after it move up.
	if len(c.UnitClaims) != 2 || c.UnitClaims[1].UnitID != 587 {
		t.Fatalf("unit claims after the downgrade: %+v, want 900 and 587 (944 removed)", c.UnitClaims)
	}
	mcv := c.UnitClaims[1]
	if mcv.Level != claims.Uncertain || len(mcv.Evidence) != 0 || len(mcv.NeedsConfirmation) != 1 || !strings.Contains(mcv.NeedsConfirmation[0], "未核实的证据：power|1:41.00|SpecialPower_ChronoSwap|587") {
		t.Errorf("a lone false evidence string: %v, evidence %v, needsConfirmation %q", mcv.Level, mcv.Evidence, mcv.NeedsConfirmation)
	}
	ev := c.EventClaims[0]
	if ev.Level != claims.Uncertain || len(ev.Evidence) != 1 || ev.Evidence[0].Raw != "power|1:24.00|SpecialPower_PackReplaceSelf|246" || len(ev.NeedsConfirmation) != 1 {
		t.Errorf("event claim: %v, evidence %v, needsConfirmation %q", ev.Level, ev.Evidence, ev.NeedsConfirmation)
	}
	if !strings.HasPrefix(out, "正文。\n\n"+marker) {
		t.Errorf("the text changed:\n%s", out)
	}
	if len(done) != 4 || done[1].Path != "unitClaims[1]" || !done[1].Removed || done[1].From != "possible" || done[1].To != "possible" ||
		done[2].Path != "unitClaims[2]" || len(done[2].RemovedEvidence) != 1 || done[3].Path != "eventClaims[0]" {
		t.Errorf("downgrades = %+v", done)
	}
	// A pack without a confirm text for the code: the issue's message keeps the contract.
	bare := *ra3
	bare.Messages = nil
	r2, err := New(nil, interceptors.Deps{Route: "ra3", Pack: &bare}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lowered := []interceptors.Issue{{Code: "builder.not_observed", Severity: interceptors.WeakEvidence, Path: "unitClaims[2]", Message: "从未作为建造者出现。",
		Recommendation: interceptors.Recommendation{EvidenceLevel: "possible"}}}
	out, _, _ = r2.downgrade(content, lowered, DefaultThreshold)
	if u := r2.parser.Parse(out, claims.Optional).UnitClaims[2]; u.Level != claims.Possible || strings.Join(u.NeedsConfirmation, "") != "从未作为建造者出现。" {
		t.Errorf("without a confirm text: %v %q, want possible with the issue's message", u.Level, u.NeedsConfirmation)
	}
	// A Warning below the threshold with no recommendation edits nothing.
	out, done, _ = r.downgrade(content, []interceptors.Issue{{Code: "fake.warning", Severity: interceptors.Warning, Path: "unitClaims[1]", Message: "m"}}, DefaultThreshold)
	if out != content || len(done) != 0 {
		t.Errorf("a Warning without a recommendation changed the answer: %+v", done)
	}
	// A removal recommended on an Info issue is not acted on; on an evidence item it
	// removes the item's claim.
	out, _, _ = r.downgrade(content, []interceptors.Issue{{Code: "x", Severity: interceptors.Info, Path: "unitClaims[1]", Recommendation: interceptors.Recommendation{Remove: true}}}, DefaultThreshold)
	if out != content {
		t.Errorf("an Info issue removed its claim")
	}
	out, done, _ = r.downgrade(content, []interceptors.Issue{{Code: "x", Severity: interceptors.Warning, Path: "eventClaims[0].evidence[1]", Recommendation: interceptors.Recommendation{Remove: true}}}, DefaultThreshold)
	if c := r.parser.Parse(out, claims.Optional); len(c.EventClaims) != 0 || len(c.UnitClaims) != 3 || len(done) != 1 || done[0].Path != "eventClaims[0]" || !done[0].Removed {
		t.Errorf("removal on an evidence item: events %+v, downgrades %+v", c.EventClaims, done)
	}
	// asset.unknown is judged in the claimed player's faction: when another issue
	// corrects the player, the claim is corrected, not removed (the next round
	// removes it if asset.unknown survives).
	out, done, _ = r.downgrade(content, []interceptors.Issue{
		{Code: "asset.unknown", Severity: interceptors.Warning, Path: "unitClaims[1]", Recommendation: interceptors.Recommendation{Remove: true}},
		{Code: "player.mismatch", Severity: interceptors.Contradiction, Path: "unitClaims[1]", Recommendation: interceptors.Recommendation{EvidenceLevel: "uncertain", Player: "PlayerB"}},
	}, DefaultThreshold)
	if c := r.parser.Parse(out, claims.Optional); len(c.UnitClaims) != 3 || c.UnitClaims[1].Player != "PlayerB" || c.UnitClaims[1].Level != claims.Uncertain || len(done) != 1 || done[0].Removed {
		t.Errorf("a claim whose player is corrected: %+v, downgrades %+v", c.UnitClaims, done)
	}
}

// TestRemovalsMapPathsBack checks that the delivered answer's paths, after claims
// were removed over several rounds, lead back to the returned attempt's claims.
func TestRemovalsMapPathsBack(t *testing.T) {
	t.Parallel()
	// Round 1 removes unitClaims[1] and [3] of [0..5], leaving 0 2 4 5; round 2
	// removes the first of those (0), leaving 2 4 5; round 3 removes eventClaims[0].
	gone := removals{{"unitClaims": {1, 3}}, {"unitClaims": {0}}, {"eventClaims": {0}}}
	for in, want := range map[string]string{
		"unitClaims[0]":             "unitClaims[2]",
		"unitClaims[1].evidence[2]": "unitClaims[4].evidence[2]",
		"unitClaims[2]":             "unitClaims[5]",
		"eventClaims[0]":            "eventClaims[1]",
		"timelineClaims[3]":         "timelineClaims[3]",
		"unitClaims":                "unitClaims",
		"":                          "",
	} {
		if got := gone.origin(in); got != want {
			t.Errorf("origin(%q) = %q, want %q", in, got, want)
		}
	}
	if got := removals(nil).origin("unitClaims[1]"); got != "unitClaims[1]" {
		t.Errorf("no removals: %q", got)
	}
}

// TestRemovedClaimIsNamedNotCounted runs an accepted draft through the step: the
// claim about a UnitId the facts never show is removed from the claims block, the
// notice still names it (the prose states it), the claim after it is named as
// itself although its path moved, and delivered= no longer counts the removed
// claim's issue.
func TestRemovedClaimIsNamedNotCounted(t *testing.T) {
	t.Parallel()
	draft := answer("100 是基地车，9999 是矿车，733 是轰炸机。",
		unit{id: 100, claim: "AlliedMCV", level: "possible", evidence: []string{"select|1:00.00|100"}, alternatives: []string{"AlliedMiner"}},
		unit{id: 9999, claim: "AlliedMiner", level: "possible", evidence: []string{"select|1:06.39|9999"}, alternatives: []string{"AlliedMCV"}},
		unit{id: 733, claim: "AlliedBomberAircraft", level: "possible", evidence: []string{"select|6:02.00|733"}, alternatives: []string{"AlliedFighterAircraft"}})
	f := newFixture(t, setup{draft: draft, rules: map[string]rule{
		"9999 AlliedMiner":         {code: "unit.not_observed", severity: interceptors.Warning, rec: interceptors.Recommendation{Remove: true}},
		"733 AlliedBomberAircraft": {code: "fake.warning", severity: interceptors.Warning}, // nothing fixes it
	}})
	f.run(t)
	if o := f.outcome(); o != interceptors.OutcomeAccepted {
		t.Fatalf("outcome %q, want accepted", o)
	}
	content := f.ex.Response.ChoiceContent(0)
	units := parseUnits(t, content)
	if len(units) != 2 || units[0].UnitID != 100 || units[1].UnitID != 733 {
		t.Fatalf("unit claims delivered: %+v, want 100 and 733", units)
	}
	if !strings.HasPrefix(content, "100 是基地车，9999 是矿车，733 是轰炸机。") {
		t.Errorf("the prose changed:\n%s", content)
	}
	if h := f.header(HeaderIssues); h != "draft=W2;final=W2;delivered=W1" {
		t.Errorf("%s = %q, want draft=W2;final=W2;delivered=W1", HeaderIssues, h)
	}
	var downgrades []interceptors.Downgrade
	var notice *interceptors.Notice
	f.ex.Trace.Do(func(t *interceptors.Trace) { downgrades, notice = t.Downgrades, t.Notice })
	if len(downgrades) != 1 || downgrades[0].Path != "unitClaims[1]" || !downgrades[0].Removed {
		t.Errorf("downgrades = %+v, want unitClaims[1] removed", downgrades)
	}
	if notice == nil {
		t.Fatal("no notice")
	}
	if !strings.Contains(notice.Text, "UnitId 9999 是 AlliedMiner") || !strings.Contains(notice.Text, "UnitId 733 是 AlliedBomberAircraft") {
		t.Errorf("the notice does not name both claims:\n%s", notice.Text)
	}
	named := map[string]bool{}
	for _, is := range notice.Issues {
		named[is.Code+" "+is.Path] = true
	}
	if len(named) != 2 || !named["unit.not_observed unitClaims[1]"] || !named["fake.warning unitClaims[2]"] {
		t.Errorf("the notice names %v, want unit.not_observed at unitClaims[1] and fake.warning at unitClaims[2] (the returned attempt's paths)", notice.Issues)
	}
	if !strings.Contains(content, notice.Text) {
		t.Errorf("the notice is not in the content")
	}
}

// TestAPacksOwnCodeDeclaresItsHeading: the heading a finding stands under is the
// pack's declaration for its code (a pack's own rules declare theirs), else the
// default of its severity; a claim stands once, under its most serious heading,
// with every finding of its own.
func TestAPacksOwnCodeDeclaresItsHeading(t *testing.T) {
	t.Parallel()
	ra3, _ := packs(t)
	own := *ra3
	own.Messages = maps.Clone(ra3.Messages)
	own.Messages["own.citation"] = knowledge.MessageSpec{Notice: knowledge.NoticeCitation}
	r, err := New(&Config{MaxRevisions: intp(0)}, interceptors.Deps{Route: "ra3", Pack: &own}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cited := unit{id: 310, claim: "AlliedBarracks", level: "confirmed", evidence: []string{"produce|0:41.50|AlliedAntiInfantryInfantry|310"}}
	both := unit{id: 311, claim: "AlliedBarracks", level: "confirmed", evidence: []string{"produce|0:41.50|AlliedAntiInfantryInfantry|311"}}
	weak := unit{id: 587, claim: "AlliedMCV", level: "confirmed", evidence: mcv.evidence}
	draft := answer("三条判断。", cited, both, weak)
	f := newFixture(t, setup{draft: draft, rules: map[string]rule{
		"310 AlliedBarracks": {code: "own.citation", severity: interceptors.Contradiction, rec: interceptors.Recommendation{EvidenceLevel: "uncertain"}},
		"311 AlliedBarracks": {code: "own.false", severity: interceptors.Contradiction, rec: interceptors.Recommendation{EvidenceLevel: "ruled out"}},
		"587 AlliedMCV":      {code: "evidence.ambiguous", severity: interceptors.WeakEvidence, confident: true, rec: interceptors.Recommendation{EvidenceLevel: "possible"}},
	}})
	f.r = r
	f.run(t)
	var notice *interceptors.Notice
	f.ex.Trace.Do(func(tr *interceptors.Trace) { notice = tr.Notice })
	if notice == nil {
		t.Fatal("no notice")
	}
	headings := map[string]string{}
	for _, is := range notice.Issues {
		headings[is.Code+" "+is.Path] = is.Heading
	}
	for key, want := range map[string]string{
		"own.citation unitClaims[0]":       knowledge.NoticeCitation,      // declared by the pack
		"own.false unitClaims[1]":          knowledge.NoticeContradiction, // undeclared Contradiction: the default
		"evidence.ambiguous unitClaims[2]": knowledge.NoticeWeak,
	} {
		if headings[key] != want {
			t.Errorf("%s stands under %q, want %q (all: %v)", key, headings[key], want, headings)
		}
	}
	contradiction, rest, _ := strings.Cut(notice.Text, "⚠ 以下判断引用的证据")
	if strings.Contains(contradiction, "UnitId 310") || !strings.Contains(contradiction, "UnitId 311") || !strings.Contains(rest, "UnitId 310") {
		t.Errorf("310 (a wrong citation) and 311 (a false statement) are not under their headings:\n%s", notice.Text)
	}
}
