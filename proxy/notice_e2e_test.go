package proxy

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/knowledge"
)

// What reaches the reader when a problem survives the hidden revision (issue 13):
// the notice, the free downgrade of weak claims in accepted drafts, downgrades that
// keep the claims contract, and headers that count the answer as delivered.

// noticeRouteConfig is reviseRouteConfig's route with the claims contract
// injected, as an app that never asked for claims gets it.
func noticeRouteConfig(strip, revise string) string {
	return strings.Replace(reviseRouteConfig(strip, revise), "    pack: ra3\n", "    pack: ra3\n    inject: {}\n", 1)
}

// Claims on allied_vs_soviet.txt that a revision does not fix and the downgrade
// must leave honest.
const (
	// A bomber seen at 6:02 (first bomber 9:10) citing a power it never used:
	// timeline.before_production (ruled out) and power.not_used on the item.
	claimBomberPower = `{"unitId": 733, "player": "PlayerA", "claim": "AlliedBomberAircraft", "evidenceLevel": "highly likely", "evidence": ["select|6:02.00|733", "power|6:02.00|SpecialPower_PackReplaceSelf|733"], "alternatives": [], "needsConfirmation": []}`
	// An infantry unit cited at a time nothing happened: evidence.not_in_replay,
	// lowered to uncertain.
	claimShifted = `{"unitId": 900, "player": "PlayerA", "claim": "AlliedAntiInfantryInfantry", "evidenceLevel": "confirmed", "evidence": ["select|1:07.00|900"], "alternatives": [], "needsConfirmation": []}`
	// A unit of PlayerA's claimed for PlayerB: player.mismatch.
	claimWrongPlayer = `{"unitId": 944, "player": "PlayerB", "claim": "AlliedFighterAircraft", "evidenceLevel": "highly likely", "evidence": ["select|6:04.23|944"], "alternatives": [], "needsConfirmation": []}`

	stubbornProse = "## 对局概览\nPlayerA 在 6:02 出动世纪轰炸机 733；900 是一名维和步兵；944 是 PlayerB 的战斗机。"
)

var stubbornAnswer = claimsAnswer(stubbornProse, claimBomberPower, claimShifted, claimWrongPlayer)

// checkOffline validates content as factgate's own validator does, against the
// replay of the story request.
func checkOffline(t *testing.T, content string) []interceptors.Issue {
	t.Helper()
	issues, err := checkOfflineErr(content)
	if err != nil {
		t.Fatal(err)
	}
	return issues
}

// checkOfflineErr is checkOffline for a goroutine.
func checkOfflineErr(content string) ([]interceptors.Issue, error) {
	offlineOnce.Do(func() {
		reg, err := knowledge.Builtin()
		if err != nil {
			offlineErr = err
			return
		}
		offlineChecker, offlineErr = validate.NewOffline(reg.Packs(), reg.Set, validate.OfflineOptions{})
	})
	if offlineErr != nil {
		return nil, offlineErr
	}
	rep, err := offlineChecker.Check(validate.CheckRequest{Facts: []string{replayText}, Answer: content, Pack: "ra3"})
	if err != nil {
		return nil, err
	}
	return rep.Issues, nil
}

var (
	offlineOnce    sync.Once
	offlineChecker *validate.Offline
	offlineErr     error
)

// aboveInfo returns the issues more severe than Info, as "code path" strings.
func aboveInfo(issues []interceptors.Issue) []string {
	var out []string
	for _, is := range issues {
		if is.Severity > interceptors.Info {
			out = append(out, is.Severity.String()+" "+is.Code+" "+is.Path)
		}
	}
	return out
}

func TestNoticeNamesASurvivingContradictionToTheReader(t *testing.T) {
	t.Parallel()
	// The model ignores the revision request; the proxy injected the contract, so
	// the claims block is stripped and the prose is all the reader gets.
	h := newHarness(t, reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: storyDraftAnswer}), noticeRouteConfig("auto", ""))
	plain := viaGoOpenAI(t, h, false)
	if strings.Contains(plain.content, reviseMarker) {
		t.Fatalf("the injected contract's claims block reached the client:\n%s", plain.content)
	}
	if !strings.HasPrefix(plain.content, storyDraftProse) {
		t.Fatalf("the answer is not the draft's prose:\n%s", plain.content)
	}
	notice := strings.TrimSpace(strings.TrimPrefix(plain.content, storyDraftProse))
	for _, want := range []string{"UnitId 733", "AlliedBomberAircraft", "9:10", "UnitId 587"} {
		if !strings.Contains(notice, want) {
			t.Errorf("the notice after the prose lacks %q; the reader is not told what the facts say:\n%q", want, notice)
		}
	}
	tr := h.trace(t, plain.header.Get("X-Factgate-Trace-Id"))
	if got := tr.Get("notice.text").Str; got == "" || !strings.Contains(plain.content, got) {
		t.Errorf("the trace's notice %q is not the one the client got", tr.Get("notice").Raw)
	}
	for _, client := range []struct {
		name string
		run  func() clientResult
	}{
		{"go-openai stream", func() clientResult { return viaGoOpenAI(t, h, true) }},
		{"openai-go stream", func() clientResult { return viaOpenAIGo(t, h) }},
	} {
		if got := client.run(); got.content != plain.content {
			t.Errorf("%s: the streamed answer differs from the non-streamed one:\n%s\n--- non-streamed ---\n%s", client.name, got.content, plain.content)
		}
	}
}

func TestNoticeNeverAppearsWhenNothingSurvived(t *testing.T) {
	t.Parallel()
	h := newHarness(t, reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: storyFixedAnswer}), noticeRouteConfig("never", ""))
	plain := viaGoOpenAI(t, h, false)
	if plain.content != storyFixedAnswer {
		t.Errorf("a resolved answer changed on its way to the client:\n%s", plain.content)
	}
	if v := plain.header.Get("X-Factgate-Notice"); v != "" {
		t.Errorf("X-Factgate-Notice = %q on a resolved answer", v)
	}
	if tr := h.trace(t, plain.header.Get("X-Factgate-Trace-Id")); tr.Get("notice").Exists() {
		t.Errorf("the trace has a notice for a resolved answer: %s", tr.Get("notice").Raw)
	}
}

func TestAcceptedDraftWeakClaimIsDowngradedForFree(t *testing.T) {
	t.Parallel()
	// 587 is "confirmed" the Allied MCV on an unpack that a miner makes too
	// (evidence.ambiguous) and never built anything (builder.not_observed): both
	// WeakEvidence, below the threshold, so the draft is accepted.
	draft := claimsAnswer("587 在 1:41 展开，确认是盟军基地车；246 在 1:24 打包。", claimMCV, claimBase)
	h := newHarness(t, reviseScript(answerJSON{Content: draft}, answerJSON{Content: "never asked"}), noticeRouteConfig("never", ""))
	plain := viaGoOpenAI(t, h, false)
	if n := h.chatRequests(); n != 1 {
		t.Errorf("the upstream received %d chat completions; a downgrade costs no call", n)
	}
	tr := h.trace(t, plain.header.Get("X-Factgate-Trace-Id"))
	if o := tr.Get("final.outcome").Str; o != "accepted" {
		t.Errorf("outcome %q, want accepted", o)
	}
	block := claimsBlock(t, plain.content)
	mcv := block.Get("unitClaims.0")
	if l := mcv.Get("evidenceLevel").Str; l != "possible" {
		t.Errorf("the weak 587 claim reached the client at %q, want possible", l)
	}
	if !strings.Contains(mcv.Get("alternatives").Raw, `"AlliedMiner"`) {
		t.Errorf("the weak 587 claim lacks the alternative AlliedMiner: %s", mcv.Raw)
	}
	if l := block.Get("unitClaims.1.evidenceLevel").Str; l != "confirmed" {
		t.Errorf("the sound 246 claim became %q", l)
	}
	if got := aboveInfo(checkOffline(t, plain.content)); len(got) > 0 {
		t.Errorf("the delivered answer still has issues above Info: %v\n%s", got, plain.content)
	}
	if !strings.Contains(plain.content, "UnitId 587") {
		t.Errorf("the prose still says 587 is confirmed and no notice says otherwise:\n%s", plain.content)
	}
}

func TestDowngradeKeepsTheContract(t *testing.T) {
	t.Parallel()
	h := newHarness(t, reviseScript(answerJSON{Content: stubbornAnswer}, answerJSON{Content: stubbornAnswer}), noticeRouteConfig("never", ""))
	plain := viaGoOpenAI(t, h, false)
	tr := h.trace(t, plain.header.Get("X-Factgate-Trace-Id"))
	if o := tr.Get("final.outcome").Str; o != "downgraded" {
		t.Fatalf("outcome %q, want downgraded; trace %s", o, tr.Raw)
	}
	if got := aboveInfo(checkOffline(t, plain.content)); len(got) > 0 {
		t.Errorf("re-validating the downgraded answer finds issues above Info: %v\n%s", got, plain.content)
	}
	block := claimsBlock(t, plain.content)
	bomber := block.Get("unitClaims.0")
	if l := bomber.Get("evidenceLevel").Str; l != "ruled out" {
		t.Errorf("733 is %q, want ruled out", l)
	}
	if strings.Contains(bomber.Get("evidence").Raw, "PackReplaceSelf") {
		t.Errorf("733 was ruled out but keeps the false evidence item: %s", bomber.Raw)
	}
	if !strings.Contains(bomber.Get("needsConfirmation").Raw, "power|6:02.00|SpecialPower_PackReplaceSelf|733") {
		t.Errorf("the removed evidence item is not listed as unverified in needsConfirmation: %s", bomber.Raw)
	}
	shifted := block.Get("unitClaims.1")
	if l := shifted.Get("evidenceLevel").Str; l != "uncertain" {
		t.Errorf("900 is %q, want uncertain", l)
	}
	if len(shifted.Get("alternatives").Array())+len(shifted.Get("needsConfirmation").Array()) == 0 {
		t.Errorf("900 was lowered to uncertain with neither alternatives nor needsConfirmation: %s", shifted.Raw)
	}
	if p := block.Get("unitClaims.2.player").Str; p != "PlayerA" {
		t.Errorf("944's player is %q, want the owner the facts name, PlayerA", p)
	}
}

func TestIssuesHeaderCountsTheDeliveredAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, reviseScript(answerJSON{Content: stubbornAnswer}, answerJSON{Content: stubbornAnswer}), noticeRouteConfig("never", ""))
	plain := viaGoOpenAI(t, h, false)
	hdr := plain.header.Get("X-Factgate-Issues")
	_, delivered, ok := strings.Cut(hdr, ";delivered=")
	if !ok {
		t.Fatalf("X-Factgate-Issues = %q has no delivered= part", hdr)
	}
	if want := interceptors.CountSeverities(checkOffline(t, plain.content)).String(); delivered != want {
		t.Errorf("X-Factgate-Issues delivered=%s, but the answer as delivered has %s", delivered, want)
	}
	if !strings.HasPrefix(hdr, "draft=C") {
		t.Errorf("X-Factgate-Issues = %q, want the draft's contradictions counted", hdr)
	}
}

func TestResidualCountersUseTheDeliveredAnswer(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(noticeRouteConfig("never", ""), "    revise: {}\n", `    revise: {}
    experiment:
      name: honest
      control: a
      variants:
        - {name: a, weight: 1}
        - {name: b, weight: 0.000001}
`, 1)
	h := newHarness(t, reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: storyDraftAnswer}), cfg)
	plain := viaGoOpenAI(t, h, false)
	if got := aboveInfo(checkOffline(t, plain.content)); len(got) > 0 {
		t.Fatalf("the delivered answer has issues above Info: %v", got)
	}
	rep := abReport(t, h.base, 1)
	v := rep.Variants[0]
	if v.Validated != 1 {
		t.Fatalf("variant a validated %d answers, want the one sent", v.Validated)
	}
	if n := v.ResidualIssues["Contradiction"]; n != 0 {
		t.Errorf("residual_issues counts %d Contradictions; the delivered answer has none", n)
	}
	if n := v.Rates.ResidualContradiction.Count; n != 0 {
		t.Errorf("residual_contradiction counts %d answers; the delivered answer has no Contradiction", n)
	}
	resp, err := http.Get(h.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(raw), `factgate_final_issues_total{route="ra3",severity="Contradiction"`) {
		t.Errorf("factgate_final_issues_total counts a Contradiction the delivered answer does not have")
	}
}

func TestNoticeInTheHeader(t *testing.T) {
	t.Parallel()
	h := newHarness(t, reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: storyDraftAnswer}), noticeRouteConfig("always", "{notice: header}"))
	for _, stream := range []bool{false, true} {
		got := viaGoOpenAI(t, h, stream)
		if got.content != storyDraftProse+"\n" {
			t.Errorf("stream=%v: with notice: header the content changed:\n%q", stream, got.content)
		}
		raw := got.header.Get("X-Factgate-Notice")
		text, err := url.PathUnescape(raw)
		if err != nil || !strings.Contains(text, "UnitId 733") || !strings.Contains(text, "9:10") {
			t.Errorf("stream=%v: X-Factgate-Notice = %q (%q, %v), want the notice naming 733", stream, raw, text, err)
		}
	}
}

func TestNoticeOffByVariant(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(noticeRouteConfig("always", ""), "    revise: {}\n", `    revise: {}
    experiment:
      name: notice
      control: told
      allow_forcing: true
      variants:
        - {name: told, weight: 1}
        - {name: silent, weight: 1, notice: none}
`, 1)
	h := newHarness(t, reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: storyDraftAnswer}), cfg)
	for variant, told := range map[string]bool{"told": true, "silent": false} {
		status, hdr, body := h.post(t, "/v1/chat/completions", storyRequest(false), "X-Factgate-Variant", variant)
		if status != 200 {
			t.Fatalf("%s: status %d: %s", variant, status, body)
		}
		content := gjson.GetBytes(body, "choices.0.message.content").Str
		if has := strings.Contains(content, "UnitId 733"); has != told {
			t.Errorf("variant %s: notice in the content = %v, want %v:\n%s", variant, has, told, content)
		}
		tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
		if mode := tr.Get("notice.mode").Str; told && mode != "append" || !told && mode != "none" {
			t.Errorf("variant %s: the trace's notice mode is %q", variant, mode)
		}
	}
}

// choicesBody is the story request asking for two choices.
func choicesBody() string {
	return strings.Replace(storyRequest(false), `"model":"ra3-analyst"`, `"model":"ra3-analyst","n":2`, 1)
}

func TestEveryChoiceGetsItsOwnNotice(t *testing.T) {
	t.Parallel()
	script := `
rules:
  - name: revision
    match: {has_assistant: true}
    answer: {content: ` + yamlString(storyDraftAnswer) + `}
default:
  choices:
    - {content: ` + yamlString(storyDraftAnswer) + `}
    - {content: ` + yamlString(cleanAnswer) + `}
`
	for _, mode := range []string{"append", "header"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, script, noticeRouteConfig("never", "{notice: "+mode+"}"))
			status, hdr, body := h.post(t, "/v1/chat/completions", choicesBody())
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			first := gjson.GetBytes(body, "choices.0.message.content").Str
			second := gjson.GetBytes(body, "choices.1.message.content").Str
			if second != cleanAnswer {
				t.Errorf("the clean choice changed:\n%s", second)
			}
			tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
			if tr.Get("choices.0.notice.text").Str == "" || tr.Get("choices.1.notice").Exists() {
				t.Errorf("per-choice notices: %s / %s, want one for choice 0 only", tr.Get("choices.0.notice").Raw, tr.Get("choices.1.notice").Raw)
			}
			if tr.Get("notice.choice").Int() != 0 || tr.Get("notice.mode").Str != mode {
				t.Errorf("the trace's notice is %s", tr.Get("notice").Raw)
			}
			raw := hdr.Get("X-Factgate-Notice")
			switch mode {
			case "append":
				if !strings.HasPrefix(first, storyDraftProse+"\n\n⚠") || !strings.Contains(first, "UnitId 733") {
					t.Errorf("choice 0 lacks its notice:\n%s", first)
				}
				if raw != "" {
					t.Errorf("X-Factgate-Notice = %q under notice: append", raw)
				}
			case "header":
				if strings.Contains(first, "⚠") {
					t.Errorf("choice 0's content carries the notice under notice: header:\n%s", first)
				}
				index, enc, ok := strings.Cut(raw, ":")
				text, err := url.PathUnescape(enc)
				if !ok || index != "0" || err != nil || text != tr.Get("choices.0.notice.text").Str || strings.Contains(enc, ",") {
					t.Errorf("X-Factgate-Notice = %q, want 0:<choice 0's notice, percent-encoded>", raw)
				}
			}
			if got := hdr.Get("X-Factgate-Issues"); !strings.HasSuffix(got, ";delivered=0") {
				t.Errorf("X-Factgate-Issues = %q, want both choices delivered without issues", got)
			}
		})
	}
}

func TestToolCallAndJSONModeAnswersGetNoNotice(t *testing.T) {
	t.Parallel()
	t.Run("a choice that calls tools", func(t *testing.T) {
		t.Parallel()
		script := `
rules:
  - name: revision
    match: {has_assistant: true}
    answer: {content: ` + yamlString(storyDraftAnswer) + `}
default:
  choices:
    - {content: ` + yamlString(storyDraftAnswer) + `}
    - {tool_calls: [{id: call_1, function: {name: get_unit, arguments: '{"unit":733}'}}]}
`
		h := newHarness(t, script, noticeRouteConfig("never", ""))
		status, hdr, body := h.post(t, "/v1/chat/completions", choicesBody())
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		if c := gjson.GetBytes(body, "choices.1.message"); c.Get("content").Type != gjson.Null || c.Get("tool_calls.0.id").Str != "call_1" {
			t.Errorf("the tool-call choice changed: %s", c.Raw)
		}
		if !strings.Contains(gjson.GetBytes(body, "choices.0.message.content").Str, "UnitId 733") {
			t.Errorf("the analysis choice lacks its notice")
		}
		if tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id")); len(tr.Get("choices").Array()) != 1 {
			t.Errorf("the trace's choices %s, want only the validated one", tr.Get("choices").Raw)
		}
	})
	t.Run("a JSON-mode request", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: storyDraftAnswer}), noticeRouteConfig("never", ""))
		req := strings.Replace(storyRequest(false), `"model":"ra3-analyst"`, `"model":"ra3-analyst","response_format":{"type":"json_object"}`, 1)
		status, hdr, body := h.post(t, "/v1/chat/completions", req)
		if status != 200 || gjson.GetBytes(body, "choices.0.message.content").Str != storyDraftAnswer || hdr.Get("X-Factgate-Notice") != "" {
			t.Errorf("a JSON-mode answer was touched: %d %q\n%s", status, hdr.Get("X-Factgate-Notice"), body)
		}
	})
	t.Run("a pack whose answer is JSON: the notice goes to the header", func(t *testing.T) {
		t.Parallel()
		draft := sceneJSON("combat", "Goblin ambush")
		failing := answerJSON{Fault: map[string]any{"status": 500, "body": `{"error":{"message":"judge overloaded"}}`}}
		script := dndScript(answerJSON{Content: draft}, judgeRule("combat", failing))
		h := newHarness(t, script, dndRouteConfig("{validators: [combat], retries: 0}", "", ""))
		status, hdr, body := h.post(t, "/v1/chat/completions", sceneRequest(ambushChunk))
		if status != 200 || gjson.GetBytes(body, "choices.0.message.content").Str != draft {
			t.Fatalf("the scene description changed: %d %s", status, body)
		}
		text, err := url.PathUnescape(hdr.Get("X-Factgate-Notice"))
		if err != nil || !strings.Contains(text, "Not verified:") || !strings.Contains(text, "combat") {
			t.Errorf("X-Factgate-Notice = %q (%q), want the unverified combat check named", hdr.Get("X-Factgate-Notice"), text)
		}
		if mode := h.trace(t, hdr.Get("X-Factgate-Trace-Id")).Get("notice.mode").Str; mode != "header" {
			t.Errorf("the trace's notice mode is %q, want header", mode)
		}
	})
}
