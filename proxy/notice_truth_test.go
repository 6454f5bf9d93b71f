package proxy

import (
	"net/url"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// What the notice tells the reader (issue 28): a statement the facts contradict
// is told apart from one whose citation is not in the facts and from one whose
// evidence is too weak; every flagged claim is named, whatever other claims say;
// and the attempt delivered is the better one by the stated order.

// The headings of the built-in packs' notices (knowledge/packs/*/notice.tmpl).
const (
	ra3Contradiction = "⚠ 以下判断与录像不符"
	ra3Citation      = "⚠ 以下判断引用的证据在录像中找不到"
	ra3Weak          = "⚠ 以下判断证据不足"
	ra3Unverified    = "⚠ 未能核实"

	dndContradiction = "Not consistent with the transcript:"
	dndUnverified    = "Not verified:"
)

// noticeSections splits a notice into its sections, by the heading line each
// starts with (a line starting with one of headings).
func noticeSections(text string, headings ...string) map[string]string {
	out := map[string]string{}
	current := ""
	for _, line := range strings.Split(text, "\n") {
		for _, h := range headings {
			if strings.HasPrefix(line, h) {
				current = h
			}
		}
		if current != "" {
			out[current] += line + "\n"
		}
	}
	return out
}

// claimsAnswerAll renders prose, the marker and a claims block with the three
// lists (raw JSON objects).
func claimsAnswerAll(prose string, units, events, timeline []string) string {
	return prose + "\n\n" + reviseMarker + "\n```json\n{\n  \"unitClaims\": [" + strings.Join(units, ",") +
		"],\n  \"eventClaims\": [" + strings.Join(events, ",") + "],\n  \"timelineClaims\": [" + strings.Join(timeline, ",") + "]\n}\n```\n"
}

const (
	// 310 produced AlliedAntiInfantryInfantry at 0:35.00, so it is the barracks:
	// true. The citation is 6.5 s late (evidence.not_in_replay).
	claimBarracksShifted = `{"unitId": 310, "player": "PlayerA", "claim": "AlliedBarracks", "evidenceLevel": "confirmed", "evidence": ["produce|0:41.50|AlliedAntiInfantryInfantry|310"], "alternatives": [], "needsConfirmation": []}`
	// PlayerA did start its first refinery at 0:10.20 (with UnitId 246); the
	// citation names UnitId 235 (evidence.not_in_replay).
	timelineRefineryWrongUnit = `{"claim": "PlayerA 在 0:10.20 开始建造第一座 AlliedRefinery", "evidenceLevel": "confirmed", "evidence": ["build|0:10.20|AlliedRefinery|235"]}`
	// 944 is PlayerA's: player.mismatch (and asset.unknown, judged in PlayerB's
	// faction). The statement is false.
	claimFighterWrongPlayer = `{"unitId": 944, "player": "PlayerB", "claim": "AlliedFighterAircraft", "evidenceLevel": "highly likely", "evidence": ["select|6:04.23|944"], "alternatives": [], "needsConfirmation": []}`

	truthProse = "## 对局概览\n310 确认是 PlayerA 的兵营；PlayerA 在 0:10.20 开始建造第一座矿场；PlayerB 的 944 很可能是战斗机；587 在 1:41 展开，确认是盟军基地车。"
)

// TestNoticeTellsAWrongCitationFromAFalseStatement is issue 28's first case on
// the RA3 pack: the true statements whose citations are wrong are not told to
// contradict the replay; they are listed as cited evidence not found, with what
// the replay has at that time or for that unit.
func TestNoticeTellsAWrongCitationFromAFalseStatement(t *testing.T) {
	t.Parallel()
	draft := claimsAnswerAll(truthProse, []string{claimBarracksShifted, claimFighterWrongPlayer, claimMCV}, nil, []string{timelineRefineryWrongUnit})
	h := newHarness(t, reviseScript(answerJSON{Content: draft}, answerJSON{Content: draft}), noticeRouteConfig("never", ""))
	plain := viaGoOpenAI(t, h, false)
	tr := h.trace(t, plain.header.Get("X-Factgate-Trace-Id"))
	text := tr.Get("notice.text").Str
	if text == "" || !strings.Contains(plain.content, text) {
		t.Fatalf("no notice in the content:\n%s", plain.content)
	}
	s := noticeSections(text, ra3Contradiction, ra3Citation, ra3Weak, ra3Unverified)
	if c := s[ra3Contradiction]; !strings.Contains(c, "UnitId 944") {
		t.Errorf("the false statement about 944 is not under %q:\n%s", ra3Contradiction, text)
	}
	for _, true_ := range []string{"UnitId 310", "AlliedRefinery", "UnitId 587"} {
		if strings.Contains(s[ra3Contradiction], true_) {
			t.Errorf("the reader is told the true statement about %s contradicts the replay:\n%s", true_, text)
		}
	}
	cite := s[ra3Citation]
	for _, want := range []string{
		"PlayerA 的 UnitId 310 是 AlliedBarracks", "produce|0:41.50|AlliedAntiInfantryInfantry|310",
		// What the replay has for that unit and at that time.
		"0:35.00 PlayerA 生产单位 AlliedAntiInfantryInfantry [UnitId]310",
		"PlayerA 在 0:10.20 开始建造第一座 AlliedRefinery", "build|0:10.20|AlliedRefinery|235",
		"0:10.20 PlayerA 开始建造建筑 AlliedRefinery [UnitId]246",
	} {
		if !strings.Contains(cite, want) {
			t.Errorf("the cited-evidence section lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(s[ra3Weak], "UnitId 587") {
		t.Errorf("587, confirmed on an ambiguous unpack, is not under %q:\n%s", ra3Weak, text)
	}
	// The trace names each issue with its heading.
	headings := map[string]string{}
	tr.Get("notice.issues").ForEach(func(_, is gjson.Result) bool {
		headings[is.Get("code").Str+" "+is.Get("path").Str] = is.Get("heading").Str
		return true
	})
	for key, want := range map[string]string{
		"player.mismatch unitClaims[1]":                        "contradiction",
		"evidence.not_in_replay unitClaims[0].evidence[0]":     "citation",
		"evidence.not_in_replay timelineClaims[0].evidence[0]": "citation",
		"evidence.ambiguous unitClaims[2]":                     "weak",
	} {
		if headings[key] != want {
			t.Errorf("the trace's notice names %s under %q, want %q (all: %v)", key, headings[key], want, headings)
		}
	}
}

// TestNoticeNamesEveryFlaggedClaimSharingEvidence is issue 28's second case: two
// claims cite the same (wrong) evidence string, so their findings share code and
// message; the downgrade removes one of them (a UnitId the log never names). The
// notice names both, each with its own finding.
func TestNoticeNamesEveryFlaggedClaimSharingEvidence(t *testing.T) {
	t.Parallel()
	ghost := `{"unitId": 9999, "player": "PlayerA", "claim": "AlliedAntiInfantryInfantry", "evidenceLevel": "possible", "evidence": ["select|1:07.00|900"], "alternatives": ["AlliedAntiVehicleInfantry"], "needsConfirmation": []}`
	event := `{"claim": "PlayerA 在 1:07.00 选择了 900", "evidenceLevel": "confirmed", "evidence": ["select|1:07.00|900"]}`
	timeline := `{"claim": "PlayerA 在 1:07.00 第一次选择 900", "evidenceLevel": "confirmed", "evidence": ["select|1:07.00|900"]}`
	draft := claimsAnswerAll("## 对局概览\n9999 可能是维和步兵；PlayerA 在 1:07.00（确认）选择了 900。", []string{ghost, claimShifted}, []string{event}, []string{timeline})
	h := newHarness(t, reviseScript(answerJSON{Content: draft}, answerJSON{Content: draft}), noticeRouteConfig("never", "{max_revisions: 0}"))
	plain := viaGoOpenAI(t, h, false)
	tr := h.trace(t, plain.header.Get("X-Factgate-Trace-Id"))
	if !tr.Get(`downgrades.#(path=="unitClaims[0]").removed`).Bool() {
		t.Fatalf("the ghost claim was not removed: %s", tr.Get("downgrades").Raw)
	}
	named := noticeNames(tr.Get("notice"))
	for _, key := range []string{
		"unit.not_observed unitClaims[0]", "evidence.not_in_replay unitClaims[0]",
		"evidence.not_in_replay unitClaims[1]", "evidence.not_in_replay eventClaims[0]", "evidence.not_in_replay timelineClaims[0]",
	} {
		if !named[key] {
			t.Errorf("the notice does not name %s; it names %v", key, named)
		}
	}
	text := tr.Get("notice.text").Str
	for _, want := range []string{"UnitId 9999", "UnitId 900", "PlayerA 在 1:07.00 选择了 900", "PlayerA 在 1:07.00 第一次选择 900"} {
		if !strings.Contains(text, want) {
			t.Errorf("the notice does not name %q:\n%s", want, text)
		}
	}
	// Each of the four claims carries its own finding about the shared citation.
	if n := strings.Count(text, "select|1:07.00|900"); n < 4 {
		t.Errorf("the shared citation is named %d times, want once per claim (4):\n%s", n, text)
	}
}

// TestTheBetterRevisionIsDelivered is issue 28's third case on the RA3 pack: the
// draft has four Contradictions; the revision fixes three and gives another
// unit to the wrong player (a new player.mismatch). Two Contradictions, one of
// them new (weighing 2: 1 + 2 = 3 < 4), beat four: the revision is delivered.
func TestTheBetterRevisionIsDelivered(t *testing.T) {
	t.Parallel()
	baseShifted := `{"unitId": 246, "player": "PlayerA", "claim": "AlliedConstructionYard", "evidenceLevel": "confirmed", "evidence": ["power|1:30.00|SpecialPower_PackReplaceSelf|246"], "alternatives": [], "needsConfirmation": []}`
	mcvWrongPlayer := `{"unitId": 587, "player": "PlayerB", "claim": "AlliedMCV", "evidenceLevel": "possible", "evidence": ["power|1:41.00|SpecialPower_UnpackReplaceSelf|587"], "alternatives": ["AlliedMiner"], "needsConfirmation": ["587 之后是否作为建造者出现"]}`
	draftProse := "## 草稿\n733 很可能是轰炸机；900 是维和步兵；246 在 1:30 打包；944 是 PlayerB 的战斗机；587 可能是基地车。"
	revisedProse := "## 修改后\n733 可能是战斗机；900 是维和步兵；246 在 1:24 打包；944 是 PlayerB 的战斗机；587 可能是 PlayerB 的基地车。"
	draft := claimsAnswer(draftProse, claimBomber, claimShifted, baseShifted, claimWrongPlayer, claimMaybe)
	claimInfantry := strings.Replace(claimShifted, "1:07.00", "1:06.39", 1)
	revised := claimsAnswer(revisedProse, claimFighter, claimInfantry, claimBase, claimWrongPlayer, mcvWrongPlayer)
	h := newHarness(t, reviseScript(answerJSON{Content: draft}, answerJSON{Content: revised}), noticeRouteConfig("never", "{max_revisions: 1}"))
	plain := viaGoOpenAI(t, h, false)
	tr := h.trace(t, plain.header.Get("X-Factgate-Trace-Id"))
	if c := tr.Get("attempts.0.counts").Str; !strings.HasPrefix(c, "C4") {
		t.Fatalf("the draft has %s, want 4 Contradictions: %s", c, tr.Get("attempts.0.issues").Raw)
	}
	if c := tr.Get("attempts.1.counts").Str; !strings.HasPrefix(c, "C2") {
		t.Fatalf("the revision has %s, want 2 Contradictions: %s", c, tr.Get("attempts.1.issues").Raw)
	}
	if !strings.HasPrefix(plain.content, revisedProse) {
		t.Errorf("the draft (4 Contradictions) was delivered instead of the revision (2, one new):\n%s", plain.content)
	}
	if a := tr.Get("final.attempt").Int(); a != 1 {
		t.Errorf("final.attempt = %d, want the revision (1)", a)
	}
	if o := tr.Get("final.outcome").Str; o != "improved" {
		t.Errorf("outcome %q, want improved", o)
	}
	if !strings.Contains(tr.Get("notes").Raw, "player.mismatch at unitClaims[4]") {
		t.Errorf("the trace's notes do not say the revision added player.mismatch at unitClaims[4]: %s", tr.Get("notes").Raw)
	}
}

// TestDnDNoticeFollowsTheScheme: the D&D pack's notice puts a rejected scene kind
// under "Not consistent with the transcript" and a check that could not run
// under "Not verified"; and between a draft whose kind is rejected and a revision
// whose kind is still rejected and that adds an unknown field (C1 against C1,W1)
// the draft is delivered.
func TestDnDNoticeFollowsTheScheme(t *testing.T) {
	t.Parallel()
	t.Run("a rejected kind contradicts the transcript", func(t *testing.T) {
		t.Parallel()
		draft := sceneJSON("narrative", "Goblin ambush")
		worse := `{"kind": "narrative", "title": "Goblin ambush", "summary": "What happens in the chunk, in two sentences.", "mood": "tense"}`
		script := dndScript(answerJSON{Content: draft},
			judgeRule("narrative", answerJSON{Content: verdict("combat_should_be_added", "Initiative is rolled and a goblin is hit.")}),
			revisionRule(answerJSON{Content: worse}))
		h := newHarness(t, script, dndRouteConfig("{validators: [combat]}", "{max_revisions: 1}", ""))
		status, hdr, body := h.post(t, "/v1/chat/completions", sceneRequest(ambushChunk))
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		if got := gjson.GetBytes(body, "choices.0.message.content").Str; got != draft {
			t.Errorf("delivered %q, want the draft (C1 beats C1,W1)", got)
		}
		text, err := url.PathUnescape(hdr.Get("X-Factgate-Notice"))
		if err != nil {
			t.Fatal(err)
		}
		s := noticeSections(text, dndContradiction, dndUnverified)
		if !strings.Contains(s[dndContradiction], `The scene kind "narrative" does not match`) {
			t.Errorf("the rejected kind is not under %q:\n%s", dndContradiction, text)
		}
	})
	t.Run("a revision that fixes the kind and adds a Warning beats the draft", func(t *testing.T) {
		t.Parallel()
		draft := sceneJSON("narrative", "Goblin ambush")
		better := `{"kind": "combat", "title": "Goblin ambush", "summary": "What happens in the chunk, in two sentences.", "mood": "tense"}`
		script := dndScript(answerJSON{Content: draft},
			judgeRule("narrative", answerJSON{Content: verdict("combat_should_be_added", "Initiative is rolled and a goblin is hit.")}),
			judgeRule("combat", answerJSON{Content: verdict("approved", "The kind fits.")}),
			revisionRule(answerJSON{Content: better}))
		h := newHarness(t, script, dndRouteConfig("{validators: [combat]}", "{max_revisions: 1}", ""))
		status, hdr, body := h.post(t, "/v1/chat/completions", sceneRequest(ambushChunk))
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		if got := gjson.GetBytes(body, "choices.0.message.content").Str; got != better {
			t.Errorf("delivered %q, want the revision (W1 beats C1)", got)
		}
		text, _ := url.PathUnescape(hdr.Get("X-Factgate-Notice"))
		if s := noticeSections(text, dndContradiction, dndUnverified); s[dndContradiction] != "" || !strings.Contains(s[dndUnverified], "mood") {
			t.Errorf("the notice of the revision with an unknown field: want it under %q only:\n%s", dndUnverified, text)
		}
	})
	t.Run("a check that could not run is not verified", func(t *testing.T) {
		t.Parallel()
		draft := sceneJSON("combat", "Goblin ambush")
		failing := answerJSON{Fault: map[string]any{"status": 500, "body": `{"error":{"message":"judge overloaded"}}`}}
		h := newHarness(t, dndScript(answerJSON{Content: draft}, judgeRule("combat", failing)), dndRouteConfig("{validators: [combat], retries: 0}", "", ""))
		_, hdr, _ := h.post(t, "/v1/chat/completions", sceneRequest(ambushChunk))
		text, _ := url.PathUnescape(hdr.Get("X-Factgate-Notice"))
		s := noticeSections(text, dndContradiction, dndUnverified)
		if !strings.Contains(s[dndUnverified], "combat") || s[dndContradiction] != "" {
			t.Errorf("a judge that could not run: want it under %q only:\n%s", dndUnverified, text)
		}
	})
}
