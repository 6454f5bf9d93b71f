package revise

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/knowledge"
)

// The seed's story: 733 is not a bomber at 6:02 (no bomber was produced before
// 9:10), and 587's unpack does not prove an MCV.
var (
	bomber  = unit{id: 733, claim: "AlliedBomberAircraft", level: "highly likely", evidence: []string{"select|6:02.00|733"}}
	mcv     = unit{id: 587, claim: "AlliedMCV", level: "confirmed", evidence: []string{"power|1:41.00|SpecialPower_UnpackReplaceSelf|587"}}
	miner   = unit{id: 587, claim: "AlliedMCV", level: "possible", evidence: mcv.evidence, alternatives: []string{"AlliedMiner"}}
	fighter = unit{id: 733, claim: "AlliedFighterAircraft", level: "possible", evidence: bomber.evidence, alternatives: []string{"AlliedBomberAircraft"}}
	base    = unit{id: 246, claim: "AlliedConstructionYard", level: "confirmed", evidence: []string{"power|1:24.00|SpecialPower_PackReplaceSelf|246"}}

	storyRules = map[string]rule{
		"733 AlliedBomberAircraft": {code: "timeline.before_production", severity: interceptors.Contradiction,
			rec:   interceptors.Recommendation{EvidenceLevel: "ruled out", Text: "改正或放弃这个判断。"},
			facts: []interceptors.FactLine{{At: 362 * time.Second, Text: "6:02.00 PlayerA 选择 [UnitId]733"}, {At: 550 * time.Second, Text: "9:10.00 PlayerA 生产单位 AlliedBomberAircraft [UnitId]702(生产者)"}}},
		"587 AlliedMCV": {code: "evidence.ambiguous", severity: interceptors.WeakEvidence, confident: true,
			rec:   interceptors.Recommendation{EvidenceLevel: "possible", Alternatives: []string{"AlliedMiner"}, Text: "把证据等级降为 possible。"},
			facts: []interceptors.FactLine{{At: 101 * time.Second, Text: "1:41.00 PlayerA 使用 SpecialPower_UnpackReplaceSelf [UnitId]587"}}},
		"733 AlliedGunshipAircraft": {code: "asset.power_mismatch", severity: interceptors.Contradiction,
			rec: interceptors.Recommendation{EvidenceLevel: "ruled out"}},
	}

	draftProse   = "PlayerA 在 6:02 出动了一架轰炸机，587 确认是基地车。"
	fixedProse   = "PlayerA 的 733 可能是战斗机；587 可能是基地车，也可能是矿车展开的指挥中心。"
	storyDraft   = answer(draftProse, bomber, mcv, base)
	storyFixed   = answer(fixedProse, fighter, miner, base)
	storyFixedUs = usage(1300, 120)
)

func intp(n int) *int { return &n }

func TestRevisionResolvesAContradiction(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{draft: storyDraft, rules: storyRules, replies: []reply{{content: storyFixed, usage: storyFixedUs}}})
	f.run(t)
	if got := f.ex.Response.Content(); got != storyFixed {
		t.Errorf("the client gets:\n%s\nwant the corrected answer:\n%s", got, storyFixed)
	}
	if got := f.header(HeaderRevisions); got != "1" {
		t.Errorf("%s = %q, want 1", HeaderRevisions, got)
	}
	if got := f.header(HeaderIssues); got != "draft=C1,E1;final=0;delivered=0" {
		t.Errorf("%s = %q, want draft=C1,E1;final=0;delivered=0", HeaderIssues, got)
	}
	if got, want := f.ex.Usage, usage(1000, 100).Add(storyFixedUs); got != want {
		t.Errorf("usage = %+v, want the draft's plus the revision's %+v", got, want)
	}
	if f.outcome() != interceptors.OutcomeResolved || len(f.ex.Issues) != 0 {
		t.Errorf("outcome %q with final issues %v, want resolved and none", f.outcome(), f.ex.Issues)
	}
	if n := len(f.up.requests()); n != 1 {
		t.Errorf("%d hidden calls, want 1", n)
	}
	if got := f.metric("factgate_revisions_total", "outcome", interceptors.OutcomeResolved); got != 1 {
		t.Errorf("factgate_revisions_total{outcome=resolved} = %v, want 1", got)
	}
	if got := f.metric("factgate_revision_tokens_total", "route", "ra3"); got != float64(storyFixedUs.TotalTokens) {
		t.Errorf("factgate_revision_tokens_total = %v, want %d", got, storyFixedUs.TotalTokens)
	}
	var attempts []interceptors.Attempt
	f.ex.Trace.Do(func(tr *interceptors.Trace) { attempts = tr.Attempts })
	if len(attempts) != 2 || attempts[0].Kind != interceptors.KindDraft || attempts[1].Kind != interceptors.KindRevision || attempts[1].RequestBytes == 0 || attempts[1].Content != storyFixed {
		t.Errorf("trace attempts = %+v, want the draft then the revision with its request size and content", attempts)
	}
}

func TestCleanDraftMakesNoCall(t *testing.T) {
	t.Parallel()
	draft := answer("PlayerA 在 1:24 打包主基地。", base)
	f := newFixture(t, setup{draft: draft, rules: storyRules, injected: true, opts: Options{Strip: StripNever}})
	f.run(t)
	if n := len(f.up.requests()); n != 0 {
		t.Errorf("%d hidden calls for a clean draft, want none", n)
	}
	if got := f.ex.Response.Content(); got != draft {
		t.Errorf("a clean draft changed:\n%s", got)
	}
	if f.header(HeaderRevisions) != "0" || f.header(HeaderIssues) != "draft=0;final=0;delivered=0" || f.outcome() != interceptors.OutcomeAccepted {
		t.Errorf("headers %v, outcome %q; want 0 revisions, draft=0;final=0;delivered=0, accepted", f.ex.ResponseHeaders, f.outcome())
	}
	if f.header(HeaderNotice) != "" || strings.Contains(f.ex.Response.Content(), "⚠") {
		t.Errorf("a clean draft got a notice: %v", f.ex.ResponseHeaders)
	}
}

func TestWeakEvidenceAloneIsAccepted(t *testing.T) {
	t.Parallel()
	prose := "587 确认是基地车。"
	draft := answer(prose, mcv)
	tests := []struct {
		name      string
		cfg       *Config
		level     claims.Level // 587's level as delivered
		notice    bool
		unchanged bool
	}{
		{name: "below_threshold (default): downgraded for free, and the reader is told", level: claims.Possible, notice: true},
		{name: "threshold_only: the claims stay, the reader is told", cfg: &Config{Downgrade: DowngradeThresholdOnly}, level: claims.Confirmed, notice: true},
		{name: "threshold_only without a notice: the draft as written", cfg: &Config{Downgrade: DowngradeThresholdOnly, Notice: NoticeNone}, level: claims.Confirmed, unchanged: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, setup{cfg: tc.cfg, draft: draft, rules: storyRules})
			f.run(t)
			got := f.ex.Response.Content()
			if n := len(f.up.requests()); n != 0 || f.outcome() != interceptors.OutcomeAccepted {
				t.Errorf("%d calls, outcome %q; a WeakEvidence below the threshold is not revised", n, f.outcome())
			}
			if tc.unchanged && got != draft {
				t.Errorf("the draft changed:\n%s", got)
			}
			if u := parseUnits(t, got)[0]; u.Level != tc.level {
				t.Errorf("587 is delivered at %v, want %v", u.Level, tc.level)
			} else if tc.level == claims.Possible && !containsString(u.Alternatives, "AlliedMiner") {
				t.Errorf("587 was lowered without the recommended alternative: %v", u.Alternatives)
			}
			if has := strings.HasPrefix(got, prose+"\n\n⚠") && strings.Contains(got, "UnitId 587"); has != tc.notice {
				t.Errorf("notice after the prose = %v, want %v:\n%s", has, tc.notice, got)
			}
		})
	}
}

func TestUnresolvedClaimsAreDowngraded(t *testing.T) {
	t.Parallel()
	improvedProse := "PlayerA 在 6:02 出动了轰炸机；587 可能是基地车。"
	tests := []struct {
		name       string
		replies    []reply
		calls      int
		outcome    string
		wantProse  string
		downgrades []interceptors.Downgrade
	}{
		{name: "two revisions that do not fix it: the better one is downgraded", calls: 2, outcome: interceptors.OutcomeImproved,
			replies: []reply{
				{content: answer(improvedProse, bomber, miner, base)},
				{content: answer("PlayerA 在 6:02 出动了一架轰炸机（很可能）。", bomber, mcv, base)},
			},
			wantProse:  improvedProse,
			downgrades: []interceptors.Downgrade{{Path: "unitClaims[0]", From: "highly likely", To: "ruled out"}}},
		{name: "the same issues repeat: the draft is downgraded", calls: 1, outcome: interceptors.OutcomeDowngraded,
			replies:   []reply{{content: answer("PlayerA 在 6:02 出动了一架轰炸机。", bomber, mcv, base)}},
			wantProse: draftProse,
			downgrades: []interceptors.Downgrade{
				{Path: "unitClaims[0]", From: "highly likely", To: "ruled out"},
				{Path: "unitClaims[1]", From: "confirmed", To: "possible", Alternatives: []string{"AlliedMiner"}},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, setup{draft: storyDraft, rules: storyRules, replies: tc.replies})
			f.run(t)
			if n := len(f.up.requests()); n != tc.calls {
				t.Errorf("%d hidden calls, want %d", n, tc.calls)
			}
			if f.outcome() != tc.outcome {
				t.Errorf("outcome %q, want %q", f.outcome(), tc.outcome)
			}
			got := f.ex.Response.Content()
			if !strings.HasPrefix(got, tc.wantProse+"\n\n⚠") || !strings.Contains(got, "UnitId 733") || !strings.Contains(got, "\n\n"+marker) {
				t.Errorf("returned prose is not %q followed by a notice naming 733 and the claims block:\n%s", tc.wantProse, got)
			}
			units := parseUnits(t, got)
			if units[0].Level != claims.RuledOut {
				t.Errorf("733 bomber level = %v, want ruled out (the recommendation)", units[0].Level)
			}
			if units[1].Level != claims.Possible || !containsString(units[1].Alternatives, "AlliedMiner") {
				t.Errorf("587 MCV = %v %v, want possible with AlliedMiner", units[1].Level, units[1].Alternatives)
			}
			if units[2].Level != claims.Confirmed || len(units[2].Alternatives) != 0 {
				t.Errorf("the unflagged 246 claim changed: %v %v", units[2].Level, units[2].Alternatives)
			}
			var dg []interceptors.Downgrade
			f.ex.Trace.Do(func(tr *interceptors.Trace) { dg = tr.Downgrades })
			if !equalDowngrades(dg, tc.downgrades) {
				t.Errorf("trace downgrades = %+v, want %+v", dg, tc.downgrades)
			}
			assertDowngradeInvariant(t, got, f.ex.Issues, DefaultThreshold)
		})
	}
}

func equalDowngrades(a, b []interceptors.Downgrade) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Path != b[i].Path || a[i].From != b[i].From || a[i].To != b[i].To || strings.Join(a[i].Alternatives, ",") != strings.Join(b[i].Alternatives, ",") {
			return false
		}
	}
	return true
}

// assertDowngradeInvariant checks that every flagged claim left in content is at
// most at its recommended level and lists the recommended alternatives.
func assertDowngradeInvariant(t *testing.T, content string, issues []interceptors.Issue, threshold interceptors.Severity) {
	t.Helper()
	ra3, _ := packs(t)
	p, _ := claims.NewParser(ra3.Claims, ra3.Facts.Evidence)
	c := p.Parse(content, claims.Optional)
	byPath := map[string]*claims.UnitClaim{}
	levels := map[string]claims.Level{}
	for i := range c.UnitClaims {
		byPath[c.UnitClaims[i].Path] = &c.UnitClaims[i]
		levels[c.UnitClaims[i].Path] = c.UnitClaims[i].Level
	}
	for _, list := range [][]claims.Claim{c.EventClaims, c.TimelineClaims} {
		for i := range list {
			levels[list[i].Path] = list[i].Level
		}
	}
	for _, is := range issues {
		rec, ok := Downgraded(is, threshold)
		if !ok {
			continue
		}
		p := claims.ClaimPath(is.Path)
		l, found := levels[p]
		if !found {
			t.Errorf("flagged claim %s (%s) is missing from the returned answer", p, is.Code)
			continue
		}
		if belief(l) > belief(rec) {
			t.Errorf("flagged claim %s (%s) is %v, above the recommended %v", p, is.Code, l, rec)
		}
		if u := byPath[p]; u != nil {
			for _, a := range is.Recommendation.Alternatives {
				if !containsTrimmed(u.Alternatives, a) {
					t.Errorf("flagged claim %s (%s) lacks the recommended alternative %s: %v", p, is.Code, a, u.Alternatives)
				}
			}
		}
	}
}

func TestLeakingRevisionLosesToACleanOne(t *testing.T) {
	t.Parallel()
	leaky := answer("抱歉，之前的回答有误。"+fixedProse, fighter, miner, base)
	t.Run("a later clean revision wins", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, setup{draft: storyDraft, rules: storyRules, replies: []reply{{content: leaky}, {content: storyFixed}}})
		f.run(t)
		if got := f.ex.Response.Content(); got != storyFixed {
			t.Errorf("returned:\n%s\nwant the clean revision", got)
		}
		reqs := f.up.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d calls, want 2 (the leak is listed in the second request)", len(reqs))
		}
		turn := gjson.GetBytes(reqs[1], "messages.#(role==\"user\")#.content|@reverse|0").Str
		if !strings.Contains(turn, "抱歉") {
			t.Errorf("the second revision request does not name the leak:\n%s", turn)
		}
		var a []interceptors.Attempt
		f.ex.Trace.Do(func(tr *interceptors.Trace) { a = tr.Attempts })
		if !a[1].Leaked || a[1].Issues[len(a[1].Issues)-1].Code != CodeLeak {
			t.Errorf("attempt 1 not recorded as leaking: %+v", a[1])
		}
	})
	t.Run("the draft beats a leaking revision", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, setup{cfg: &Config{MaxRevisions: intp(1)}, draft: storyDraft, rules: storyRules, replies: []reply{{content: leaky}}})
		f.run(t)
		got := f.ex.Response.Content()
		if strings.Contains(got, "抱歉") || !strings.HasPrefix(got, draftProse) {
			t.Errorf("a leaking revision reached the client:\n%s", got)
		}
		if f.outcome() != interceptors.OutcomeDowngraded {
			t.Errorf("outcome %q, want downgraded", f.outcome())
		}
	})
	t.Run("a phrase the draft already used is not a leak", func(t *testing.T) {
		t.Parallel()
		draft := answer("修订版地图上，"+draftProse, bomber, base)
		fixed := answer("修订版地图上，"+fixedProse, fighter, base)
		f := newFixture(t, setup{draft: draft, rules: storyRules, replies: []reply{{content: fixed}}})
		f.run(t)
		if got := f.ex.Response.Content(); got != fixed {
			t.Errorf("returned:\n%s\nwant the revision", got)
		}
	})
}

func TestFailedRevisionCallReturnsTheDowngradedDraft(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply reply
		cfg   *Config
		why   string
	}{
		{name: "status 500", reply: reply{status: 500, raw: `{"error":{"message":"overloaded"}}`}, why: "status 500"},
		{name: "transport error", reply: reply{err: errBoom}, why: "connection reset"},
		{name: "malformed JSON", reply: reply{raw: `{"choices":[{"message":{"content":"trunc`}, why: "not valid JSON"},
		{name: "nested too deep", reply: reply{raw: `{"choices":[{"message":{"content":"x"}}],"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`}, why: "deeper than server.max_json_depth"},
		{name: "empty content", reply: reply{content: "  "}, why: "no content"},
		{name: "budget spent", reply: reply{hang: true}, cfg: &Config{Budget: units.Duration(30 * time.Millisecond)}, why: "budget"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, setup{cfg: tc.cfg, draft: storyDraft, rules: storyRules, replies: []reply{tc.reply}})
			f.run(t)
			got := f.ex.Response.Content()
			if !strings.HasPrefix(got, draftProse) {
				t.Errorf("returned:\n%s\nwant the draft's prose", got)
			}
			if u := parseUnits(t, got); u[0].Level != claims.RuledOut {
				t.Errorf("the contradicted claim is %v, want downgraded to ruled out", u[0].Level)
			}
			if f.outcome() != interceptors.OutcomeFailed || f.header(HeaderRevisions) != "1" {
				t.Errorf("outcome %q, revisions %q; want failed and 1", f.outcome(), f.header(HeaderRevisions))
			}
			var notes []string
			var a []interceptors.Attempt
			f.ex.Trace.Do(func(tr *interceptors.Trace) { notes, a = tr.Notes, tr.Attempts })
			if len(a) != 2 || !strings.Contains(a[1].Error, tc.why) || !strings.Contains(strings.Join(notes, "\n"), tc.why) {
				t.Errorf("the trace does not say why (%q): attempts %+v notes %q", tc.why, a, notes)
			}
		})
	}
}

func TestClientDisconnectCancelsTheRevision(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{draft: storyDraft, rules: storyRules, replies: []reply{{hang: true}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.r.OnResponse(ctx, f.ex) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("OnResponse = %v, want the context's cancellation", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the revision did not stop when the client went away")
	}
}

func TestRepairAppendsTheMissingClaimsBlock(t *testing.T) {
	t.Parallel()
	prose := "PlayerA 在 1:24 打包主基地，1:41 展开。"
	block := marker + "\n```json\n" + `{"unitClaims":[{"unitId":246,"player":"PlayerA","claim":"AlliedConstructionYard","evidenceLevel":"confirmed","evidence":["power|1:24.00|SpecialPower_PackReplaceSelf|246"],"alternatives":[],"needsConfirmation":[]}],"eventClaims":[],"timelineClaims":[]}` + "\n```"
	t.Run("the block is appended and validated", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, setup{draft: prose, rules: storyRules, opts: Options{Strip: StripNever}, replies: []reply{{content: "好的。\n" + block, usage: usage(900, 60)}}})
		f.run(t)
		got := f.ex.Response.Content()
		if !strings.HasPrefix(got, prose+"\n\n"+marker+"\n```json\n") || strings.Contains(got, "好的") {
			t.Errorf("repaired answer:\n%s\nwant the draft's prose, then the marker and the block only", got)
		}
		if f.outcome() != interceptors.OutcomeResolved || f.header(HeaderIssues) != "draft=F1;final=0;delivered=0" {
			t.Errorf("outcome %q, issues %q; want resolved, draft=F1;final=0;delivered=0", f.outcome(), f.header(HeaderIssues))
		}
		reqs := f.up.requests()
		if len(reqs) != 1 || !strings.Contains(gjson.GetBytes(reqs[0], "messages.3.content").Str, "只输出声明部分") {
			t.Errorf("want one repair request with the pack's repair text; got %d requests", len(reqs))
		}
		var a []interceptors.Attempt
		f.ex.Trace.Do(func(tr *interceptors.Trace) { a = tr.Attempts })
		if len(a) != 2 || a[1].Kind != interceptors.KindRepair {
			t.Errorf("trace attempts %+v, want draft and repair", a)
		}
	})
	// Issue 11: stripping the repaired block gave the draft plus a "\n".
	t.Run("stripped again, the repaired answer is the draft byte for byte", func(t *testing.T) {
		t.Parallel()
		for _, draft := range []string{prose, prose + "\n", prose + "\r\n"} {
			f := newFixture(t, setup{draft: draft, rules: storyRules, injected: true, replies: []reply{{content: block}}})
			f.run(t)
			if got := f.ex.Response.Content(); got != draft {
				t.Errorf("the client got %q, want the draft %q", got, draft)
			}
		}
	})
	t.Run("a repaired block with a contradiction is then revised", func(t *testing.T) {
		t.Parallel()
		bad := marker + "\n```json\n" + `{"unitClaims":[{"unitId":733,"player":"PlayerA","claim":"AlliedBomberAircraft","evidenceLevel":"highly likely","evidence":["select|6:02.00|733"]}]}` + "\n```"
		fixed := answer(prose, fighter)
		f := newFixture(t, setup{draft: prose, rules: storyRules, replies: []reply{{content: bad}, {content: fixed}}})
		f.run(t)
		if got := f.ex.Response.Content(); got != fixed {
			t.Errorf("returned:\n%s\nwant the revision of the repaired answer", got)
		}
		if f.header(HeaderRevisions) != "2" {
			t.Errorf("revisions = %q, want 2 (repair + revision)", f.header(HeaderRevisions))
		}
	})
}

func TestAttemptsThatLoseGroundDoNotWin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		revised string
		why     func(a interceptors.Attempt, notes []string) bool
	}{
		// C1 new (weighing 2) against the draft's C1,E1.
		{name: "a new contradiction that outweighs the one fixed", revised: answer(fixedProse, fighter, miner, base, unit{id: 733, claim: "AlliedGunshipAircraft", level: "possible", evidence: bomber.evidence}),
			why: func(_ interceptors.Attempt, notes []string) bool {
				return strings.Contains(strings.Join(notes, "\n"), "the revision has 1 Contradiction(s) the draft did not have (asset.power_mismatch at unitClaims[3]); each weighs 2")
			}},
		{name: "an unflagged claim dropped", revised: answer(fixedProse, fighter, miner),
			why: func(a interceptors.Attempt, _ []string) bool {
				return strings.HasPrefix(a.Error, "not eligible: dropped unflagged claims")
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, setup{cfg: &Config{MaxRevisions: intp(1)}, draft: storyDraft, rules: storyRules, replies: []reply{{content: tc.revised}}})
			f.run(t)
			got := f.ex.Response.Content()
			if !strings.HasPrefix(got, draftProse) {
				t.Errorf("an attempt that lost ground won:\n%s", got)
			}
			var a []interceptors.Attempt
			var notes []string
			f.ex.Trace.Do(func(tr *interceptors.Trace) { a, notes = tr.Attempts, tr.Notes })
			if !tc.why(a[1], notes) {
				t.Errorf("the trace does not say why the revision could not win: %+v\nnotes %q", a[1], notes)
			}
		})
	}
}

func TestThresholdAndMaxRevisionsOverrides(t *testing.T) {
	t.Parallel()
	weak := answer("587 确认是基地车。", mcv)
	weakFixed := answer("587 可能是基地车。", miner)
	warning := interceptors.WeakEvidence
	tests := []struct {
		name    string
		cfg     *Config
		over    interceptors.Overrides
		draft   string
		calls   int
		outcome string
	}{
		{name: "route threshold WeakEvidence revises a weak claim", cfg: &Config{Threshold: &warning}, draft: weak, calls: 1, outcome: interceptors.OutcomeResolved},
		{name: "variant threshold WeakEvidence revises a weak claim", over: interceptors.Overrides{Threshold: &warning}, draft: weak, calls: 1, outcome: interceptors.OutcomeResolved},
		{name: "variant max_revisions 0 downgrades at once", over: interceptors.Overrides{MaxRevisions: intp(0)}, draft: storyDraft, calls: 0, outcome: interceptors.OutcomeDowngraded},
		{name: "route max_revisions 0 downgrades at once", cfg: &Config{MaxRevisions: intp(0)}, draft: storyDraft, calls: 0, outcome: interceptors.OutcomeDowngraded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, setup{cfg: tc.cfg, draft: tc.draft, rules: storyRules, replies: []reply{{content: weakFixed}}})
			f.ex.Overrides = tc.over
			f.run(t)
			if n := len(f.up.requests()); n != tc.calls || f.outcome() != tc.outcome {
				t.Errorf("%d calls, outcome %q; want %d, %q", n, f.outcome(), tc.calls, tc.outcome)
			}
			assertDowngradeInvariant(t, f.ex.Response.Content(), f.ex.Issues, DefaultThreshold)
		})
	}
}

func TestClaimsBlockStripping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		mode     StripMode
		injected bool
		stripped bool
	}{
		{name: "auto, contract injected by the proxy", mode: StripAuto, injected: true, stripped: true},
		{name: "auto, the client asked for claims", mode: StripAuto, injected: false, stripped: false},
		{name: "always", mode: StripAlways, stripped: true},
		{name: "never, even when injected", mode: StripNever, injected: true, stripped: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, setup{draft: storyDraft, rules: storyRules, injected: tc.injected, opts: Options{Strip: tc.mode}, replies: []reply{{content: storyFixed}}})
			f.run(t)
			got := f.ex.Response.Content()
			if has := strings.Contains(got, marker) || strings.Contains(got, "unitClaims"); has == tc.stripped {
				t.Errorf("claims block present = %v, want %v:\n%s", has, !tc.stripped, got)
			}
			if !strings.HasPrefix(got, fixedProse) {
				t.Errorf("the corrected prose is not what the client gets:\n%s", got)
			}
		})
	}
}

func TestValidatorFailureIsRecordedNotFatal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{draft: storyDraft, rules: storyRules, replies: []reply{{content: storyFixed}}})
	f.val.fail = errors.New("semantic validator unreachable")
	f.run(t)
	var incomplete bool
	f.ex.Trace.Do(func(tr *interceptors.Trace) { incomplete = tr.ValidationIncomplete })
	if !incomplete || f.ex.Response.Content() != storyFixed {
		t.Errorf("validation incomplete = %v, content revised = %v; want both", incomplete, f.ex.Response.Content() == storyFixed)
	}
}

func TestNoUpstreamDowngradesOffline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{draft: storyDraft, rules: storyRules, noUp: true})
	f.run(t)
	if f.outcome() != interceptors.OutcomeDowngraded || f.header(HeaderRevisions) != "0" {
		t.Errorf("outcome %q, revisions %q; want downgraded, 0", f.outcome(), f.header(HeaderRevisions))
	}
	assertDowngradeInvariant(t, f.ex.Response.Content(), f.ex.Issues, DefaultThreshold)
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	ra3, dnd := packs(t)
	noTemplate := *dnd
	noTemplate.Revision = nil
	tests := []struct {
		name string
		cfg  *Config
		deps interceptors.Deps
		opts Options
		want string
	}{
		{name: "no pack", deps: interceptors.Deps{}, want: "needs the route's pack"},
		{name: "pack without revision template", deps: interceptors.Deps{Pack: &noTemplate}, want: "has no revision template"},
		{name: "negative max_revisions", cfg: &Config{MaxRevisions: intp(-1)}, deps: interceptors.Deps{Pack: ra3}, want: "max_revisions: -1"},
		{name: "too many revisions", cfg: &Config{MaxRevisions: intp(50)}, deps: interceptors.Deps{Pack: ra3}, want: "max_revisions: 50"},
		{name: "negative fact lines", cfg: &Config{RelevantFactsLines: -3}, deps: interceptors.Deps{Pack: ra3}, want: "relevant_facts_lines: -3"},
		{name: "unknown strip mode", deps: interceptors.Deps{Pack: ra3}, opts: Options{Strip: "sometimes"}, want: `unknown mode "sometimes"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tc.cfg, tc.deps, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestIssuesAreComparedByClaimNotByPosition: a revision that abandons one
// contradicted claim shifts the others up; their old issues are not new ones.
func TestIssuesAreComparedByClaimNotByPosition(t *testing.T) {
	t.Parallel()
	aircraft := unit{id: 690, claim: "AlliedFighterAircraft", level: "possible", evidence: []string{"power|7:32.00|SpecialPower_UnpackReplaceSelf|690"}, alternatives: []string{"AlliedBomberAircraft"}}
	rules := map[string]rule{
		"733 AlliedBomberAircraft":  {code: "timeline.before_production", severity: interceptors.Contradiction, rec: interceptors.Recommendation{EvidenceLevel: "ruled out"}},
		"690 AlliedFighterAircraft": {code: "asset.power_mismatch", severity: interceptors.Contradiction, rec: interceptors.Recommendation{EvidenceLevel: "ruled out"}},
	}
	draft := answer(draftProse, bomber, aircraft, base)
	// The revision abandons 733 (as asked) and keeps 690, still contradicted, now
	// at unitClaims[0].
	revised := answer("PlayerA 的 690 可能是战斗机。", aircraft, base)
	f := newFixture(t, setup{cfg: &Config{MaxRevisions: intp(1)}, draft: draft, rules: rules, opts: Options{Strip: StripNever}, replies: []reply{{content: revised}}})
	f.run(t)
	var a []interceptors.Attempt
	f.ex.Trace.Do(func(tr *interceptors.Trace) { a = tr.Attempts })
	if len(a) != 2 || a[1].Error != "" {
		t.Fatalf("the revision was excluded: %+v", a)
	}
	if got := f.ex.Response.Content(); !strings.HasPrefix(got, "PlayerA 的 690") {
		t.Errorf("the draft (C2) beat the revision (C1):\n%s", got)
	}
	if f.outcome() != interceptors.OutcomeImproved || f.header(HeaderIssues) != "draft=C2;final=C1;delivered=0" {
		t.Errorf("outcome %q, issues %q; want improved, draft=C2;final=C1;delivered=0", f.outcome(), f.header(HeaderIssues))
	}
}

// TestABrokenDraftDoesNotMakeLaterIssuesNew: a draft stopped by a Fatal issue was
// never checked by the claim rules, so a revision's contradictions are not "new".
func TestABrokenDraftDoesNotMakeLaterIssuesNew(t *testing.T) {
	t.Parallel()
	broken := draftProse + "\n\n" + marker + "\n```json\n{\"unitClaims\": [ {\"unitId\": 733,, }\n```\n"
	revised := answer(draftProse, bomber, base)
	fixed := answer(fixedProse, fighter, base)
	f := newFixture(t, setup{draft: broken, rules: storyRules, opts: Options{Strip: StripNever}, replies: []reply{{content: revised}, {content: fixed}}})
	f.run(t)
	if got := f.ex.Response.Content(); got != fixed {
		t.Errorf("returned:\n%s\nwant the second revision", got)
	}
	reqs := f.up.requests()
	if len(reqs) != 2 || !strings.Contains(gjson.GetBytes(reqs[1], "messages.#(role==\"assistant\").content").Str, "AlliedBomberAircraft") {
		t.Errorf("the second revision was not built from the first (well-formed) one")
	}
	if f.outcome() != interceptors.OutcomeResolved {
		t.Errorf("outcome %q, want resolved", f.outcome())
	}
}

// slowJudge stands for an LLM-backed validator that takes long on revisions.
type slowJudge struct{}

func (slowJudge) Name() string    { return "slow-judge" }
func (slowJudge) LLMBacked() bool { return true }
func (slowJudge) ValidateAnswer(ctx context.Context, _ *interceptors.Exchange, content string) ([]interceptors.Issue, error) {
	if !strings.Contains(content, fixedProse) {
		return nil, nil
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		return nil, nil
	}
}

func TestTheBudgetCoversValidatingARevision(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{cfg: &Config{Budget: units.Duration(300 * time.Millisecond)}, draft: storyDraft, rules: storyRules, replies: []reply{{content: storyFixed}}})
	f.ex.Validators = append(f.ex.Validators, slowJudge{})
	start := time.Now()
	f.run(t)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the revision ran %v past a 300ms budget: validating it was not bounded", d)
	}
	incomplete := false
	f.ex.Trace.Do(func(tr *interceptors.Trace) { incomplete = tr.ValidationIncomplete })
	if !incomplete {
		t.Error("the trace does not say the revision's validation was cut off")
	}
}

func TestNoticeAndDowngradeConfig(t *testing.T) {
	t.Parallel()
	ra3, _ := packs(t)
	bare := *ra3
	rev := *ra3.Revision
	rev.NoticeTmpl = nil
	bare.Revision = &rev
	tests := []struct {
		name string
		cfg  *Config
		pack *knowledge.Pack
		want string // "" accepted
	}{
		{name: "an unknown notice mode", cfg: &Config{Notice: "footer"}, pack: ra3, want: `notice: unknown notice mode "footer" (want none, append or header)`},
		{name: "an unknown downgrade mode", cfg: &Config{Downgrade: "always"}, pack: ra3, want: `downgrade: unknown mode "always" (want below_threshold or threshold_only)`},
		{name: "append without the pack's notice template", cfg: &Config{Notice: NoticeAppend}, pack: &bare, want: "notice: append needs a notice template, and pack ra3 has none"},
		{name: "header without the pack's notice template", cfg: &Config{Notice: NoticeHeader}, pack: &bare, want: "notice: header needs a notice template"},
		{name: "none without a template", cfg: &Config{Notice: NoticeNone}, pack: &bare},
		{name: "the default without a template is none", pack: &bare},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := New(tc.cfg, interceptors.Deps{Route: "ra3", Pack: tc.pack}, Options{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			case tc.want == "" && r.cfg.notice != NoticeNone:
				t.Fatalf("notice mode %q, want none", r.cfg.notice)
			}
		})
	}
	r, err := New(nil, interceptors.Deps{Route: "ra3", Pack: ra3}, Options{})
	if err != nil || r.cfg.notice != NoticeAppend || r.cfg.downgrade != DowngradeBelowThreshold {
		t.Fatalf("defaults with the ra3 pack: notice %q downgrade %q (%v), want append and below_threshold", r.cfg.notice, r.cfg.downgrade, err)
	}
}
