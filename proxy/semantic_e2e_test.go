package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/proxy/mockupstream"
)

// Tokens of each call kind (prompt + completion of the fixed usages).
const (
	draftTokens    = 1050
	judgeTokens    = 430
	revisionTokens = 1260
)

func TestSemanticApprovalPassesTheDraftUnchanged(t *testing.T) {
	t.Parallel()
	draft := sceneJSON("combat", "Goblin ambush at the wagon")
	script := dndScript(answerJSON{Content: draft, Usage: draftUsage},
		judgeRule("combat", answerJSON{Content: verdict("approved", "Initiative is rolled and attacks are resolved."), Usage: judgeUsage}))
	h := newHarness(t, script, dndRouteConfig("{validators: [combat]}", "", ""))
	got := sceneViaGoOpenAI(t, h, ambushChunk, false)
	if got.content != draft {
		t.Fatalf("content = %q, want the draft", got.content)
	}
	if k := kinds(h.mock); k != "draft judge" {
		t.Fatalf("upstream calls: %s", k)
	}
	if got.usage != draftTokens+judgeTokens {
		t.Fatalf("usage %d, want the draft's and the judge's %d", got.usage, draftTokens+judgeTokens)
	}
	if v := got.header.Get("X-Factgate-Issues"); v != "draft=0;final=0;delivered=0" {
		t.Fatalf("X-Factgate-Issues = %q", v)
	}
	tr := h.trace(t, got.header.Get("X-Factgate-Trace-Id"))
	if tr.Get("validation_incomplete").Bool() || tr.Get("usage.total_tokens").Int() != draftTokens+judgeTokens {
		t.Fatalf("trace: %s", tr.Raw)
	}
	if !strings.Contains(tr.Get("notes").Raw, "semantic/combat: approved") || !tr.Get(`timings.semantic/combat`).Exists() {
		t.Fatalf("the trace does not record the judge: %s", tr.Raw)
	}
}

// Both wrong directions are rejected, sent back with guidance, revised, and the
// revision is judged again before the client gets it.
func TestSemanticRejectionIsSilentlyRevised(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name           string
		chunk          string
		wrong, correct string
		verdict        string
		explanation    string
		guidance       string
		stream         bool
	}{
		{"combat missing", ambushChunk, "narrative", "combat", "combat_should_be_added",
			"Initiative is rolled, a fire bolt hits a goblin and an arrow misses Brakka.",
			"the scene kind must be combat, not narrative", false},
		{"combat unsupported", raidChunk, "combat", "narrative", "combat_should_be_removed",
			"The party only plans a raid at dawn; nobody attacks.",
			"the scene kind must be a non-combat kind (narrative, recap or meta), not combat", false},
		{"combat missing, streaming client", ambushChunk, "recap", "combat", "combat_should_be_added",
			"Initiative is rolled and attacks are resolved.",
			"the scene kind must be combat, not recap", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			draft := sceneJSON(tc.wrong, "At the table")
			fixed := sceneJSON(tc.correct, "At the table")
			script := dndScript(answerJSON{Content: draft, Usage: draftUsage},
				judgeRule(tc.wrong, answerJSON{Content: verdict(tc.verdict, tc.explanation), Usage: judgeUsage}),
				judgeRule(tc.correct, answerJSON{Content: verdict("approved", "The kind fits."), Usage: judgeUsage}),
				revisionRule(answerJSON{Content: fixed, Usage: revisionUsage}))
			h := newHarness(t, script, dndRouteConfig("{validators: [combat]}", "", ""))
			got := sceneViaGoOpenAI(t, h, tc.chunk, tc.stream)
			if got.content != fixed {
				t.Fatalf("content = %q, want the revised scene", got.content)
			}
			if k := kinds(h.mock); k != "draft judge revision judge" {
				t.Fatalf("upstream calls: %s", k)
			}
			if want := draftTokens + judgeTokens + revisionTokens + judgeTokens; got.usage != want {
				t.Fatalf("usage %d, want %d (every call)", got.usage, want)
			}
			if v := got.header.Get("X-Factgate-Issues"); v != "draft=C1;final=0;delivered=0" {
				t.Fatalf("X-Factgate-Issues = %q", v)
			}
			if v := got.header.Get("X-Factgate-Revisions"); v != "1" {
				t.Fatalf("X-Factgate-Revisions = %q", v)
			}
			c := calls(h.mock)
			// The judge saw the draft's kind, then the revision's.
			if !strings.HasSuffix(message(c["judge"][0], -1), tc.wrong+"\n") || !strings.HasSuffix(message(c["judge"][1], -1), tc.correct+"\n") {
				t.Fatalf("judged %q then %q", message(c["judge"][0], -1), message(c["judge"][1], -1))
			}
			// The revision request sends the guidance back: what the kind must
			// become and why, never a code, a verdict name or a validator key.
			rev := c["revision"][0]
			turn := message(rev, -1)
			for _, want := range []string{tc.guidance, tc.explanation, `The scene kind "` + tc.wrong + `" does not match`} {
				if !strings.Contains(turn, want) {
					t.Errorf("the revision request lacks %q:\n%s", want, turn)
				}
			}
			for _, never := range []string{"semantic.", "semantic/", tc.verdict, "Contradiction"} {
				if strings.Contains(turn, never) {
					t.Errorf("the revision request shows %q:\n%s", never, turn)
				}
			}
			if message(rev, -2) != draft {
				t.Fatalf("the assistant turn is %q, want the draft", message(rev, -2))
			}
			tr := h.trace(t, got.header.Get("X-Factgate-Trace-Id"))
			if o := tr.Get("final.outcome").Str; o != "resolved" {
				t.Fatalf("final outcome %q: %s", o, tr.Raw)
			}
			if code := tr.Get("attempts.0.issues.0.code").Str; code != "semantic.rejected" {
				t.Fatalf("draft issue %q", code)
			}
		})
	}
}

// The combat policy is one asset: the producer's injected prompt and the judge's
// prompt carry it byte for byte.
func TestSemanticPolicyIsOneAssetInBothPrompts(t *testing.T) {
	t.Parallel()
	script := dndScript(answerJSON{Content: sceneJSON("combat", "Ambush")},
		judgeRule("combat", answerJSON{Content: verdict("approved", "They fight.")}))
	h := newHarness(t, script, dndRouteConfig("{validators: [combat]}", "", ""))
	if status, _, body := h.post(t, "/v1/chat/completions", sceneRequest(ambushChunk)); status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	policy := dndPolicy(t)
	c := calls(h.mock)
	producer, judge := message(c["draft"][0], 0), message(c["judge"][0], 0)
	if !strings.Contains(producer, policy) {
		t.Fatalf("the producer's system prompt does not carry the policy byte for byte:\n%s", producer)
	}
	if !strings.HasPrefix(judge, policy) {
		t.Fatalf("the judge's system prompt does not start with the policy byte for byte:\n%s", judge)
	}
	// One asset, not two near-duplicates: the policy's heading occurs once in each.
	heading := policy[:strings.IndexByte(policy, '\n')]
	if strings.Count(producer, heading) != 1 || strings.Count(judge, heading) != 1 {
		t.Fatalf("the policy heading %q occurs %d and %d times", heading, strings.Count(producer, heading), strings.Count(judge, heading))
	}
}

// What the mock received from the judge: the strict contract and nothing the model
// should not see.
func TestSemanticJudgeRequestIsStrictAndCarriesNoIDs(t *testing.T) {
	t.Parallel()
	script := dndScript(answerJSON{Content: sceneJSON("narrative", "Ambush")},
		judgeRule("narrative", answerJSON{Content: verdict("approved", "Fine.")}))
	h := newHarness(t, script, dndRouteConfig("{validators: [combat]}", "", ""))
	status, hdr, body := h.post(t, "/v1/chat/completions", sceneRequest(ambushChunk), "X-Factgate-Session", "campaign-7")
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	judge := calls(h.mock)["judge"]
	if len(judge) != 1 {
		t.Fatalf("%d judge calls", len(judge))
	}
	req := judge[0].Body
	var rf any
	if err := json.Unmarshal([]byte(gjson.GetBytes(req, "response_format").Raw), &rf); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "json_schema", "json_schema": map[string]any{
		"name": "verdict", "strict": true,
		"schema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"verdict":     map[string]any{"type": "string", "enum": []any{"approved", "combat_should_be_added", "combat_should_be_removed"}},
				"explanation": map[string]any{"type": "string"},
			},
			"required":             []any{"verdict", "explanation"},
			"additionalProperties": false,
		},
	}}
	if !reflect.DeepEqual(rf, want) {
		t.Fatalf("response_format = %s", gjson.GetBytes(req, "response_format").Raw)
	}
	if n := len(gjson.GetBytes(req, "messages").Array()); n != 2 || message(judge[0], 1) == "" {
		t.Fatalf("%d messages", n)
	}
	if !strings.Contains(message(judge[0], 1), "I cast fire bolt at the closer one") {
		t.Fatal("the judge did not get the chunk")
	}
	for _, never := range []string{
		"d01_goblin_ambush", "sha256:77aa01", "campaign-7", "chunk_id", "metadata",
		hdr.Get("X-Factgate-Trace-Id"), "semantic.rejected", "semantic.failed", "semantic/combat",
		"You write scene descriptions", // the client's own prompt is the producer's business
	} {
		if strings.Contains(string(req), never) {
			t.Errorf("the judge request contains %q", never)
		}
	}
	if m := gjson.GetBytes(req, "model").Str; m != "deepseek-chat" {
		t.Errorf("judge model %q, want the route's upstream model", m)
	}
}

func TestSemanticNoJudgeCallForAMalformedDraft(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		revise string
		calls  string
		issues string
	}{
		{"no revision: the malformed draft goes out flagged", "{max_revisions: 0}", "draft", "draft=F1;final=F1;delivered=F1"},
		{"the revision is judged, the draft was not", "{}", "draft revision judge", "draft=F1;final=0;delivered=0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			script := dndScript(answerJSON{Content: "The goblins attack the wagon. Definitely combat!"},
				judgeRule("combat", answerJSON{Content: verdict("approved", "They fight.")}),
				revisionRule(answerJSON{Content: sceneJSON("combat", "Goblin ambush")}))
			h := newHarness(t, script, dndRouteConfig("{validators: [combat]}", tc.revise, ""))
			got := sceneViaGoOpenAI(t, h, ambushChunk, false)
			if k := kinds(h.mock); k != tc.calls {
				t.Fatalf("upstream calls %q, want %q", k, tc.calls)
			}
			if v := got.header.Get("X-Factgate-Issues"); v != tc.issues {
				t.Fatalf("X-Factgate-Issues = %q, want %q", v, tc.issues)
			}
		})
	}
}

func TestSemanticFailurePolicy(t *testing.T) {
	t.Parallel()
	failing := answerJSON{Fault: map[string]any{"status": 500, "body": `{"error":{"message":"judge overloaded"}}`}}
	cases := []struct {
		name     string
		semantic string
		judge    []answerJSON
		status   int
		calls    string
		issues   string
	}{
		{"open: the draft passes, marked", "{validators: [combat]}", []answerJSON{failing}, 200, "draft judge judge", "draft=W1;final=W1;delivered=W1"},
		{"open, no retry", "{validators: [combat], retries: 0}", []answerJSON{failing}, 200, "draft judge", "draft=W1;final=W1;delivered=W1"},
		{"open: malformed, then valid", "{validators: [combat]}", []answerJSON{{Content: `{"verdict": "approved"}`}, {Content: verdict("approved", "They fight.")}}, 200, "draft judge judge", "draft=0;final=0;delivered=0"},
		{"open: inconsistent twice", "{validators: [combat]}", []answerJSON{{Content: verdict("combat_should_be_added", "It is combat.")}}, 200, "draft judge judge", "draft=W1;final=W1;delivered=W1"},
		{"closed: the request fails", "{validators: [combat], failure_policy: closed}", []answerJSON{failing}, 502, "draft judge judge", "draft=F1;final=F1;delivered=F1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			draft := sceneJSON("combat", "Goblin ambush")
			script := dndScript(answerJSON{Content: draft}, judgeRule("combat", tc.judge...),
				revisionRule(answerJSON{Content: sceneJSON("narrative", "Never sent")}))
			h := newHarness(t, script, dndRouteConfig(tc.semantic, "", ""))
			status, hdr, body := h.post(t, "/v1/chat/completions", sceneRequest(ambushChunk))
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if k := kinds(h.mock); k != tc.calls {
				t.Fatalf("upstream calls %q, want %q", k, tc.calls)
			}
			if v := hdr.Get("X-Factgate-Issues"); v != tc.issues {
				t.Fatalf("X-Factgate-Issues = %q, want %q", v, tc.issues)
			}
			tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
			failed := strings.Contains(tc.issues, "W1") || strings.Contains(tc.issues, "F1")
			if tr.Get("validation_incomplete").Bool() != failed {
				t.Fatalf("validation_incomplete = %v: %s", tr.Get("validation_incomplete").Bool(), tr.Raw)
			}
			if status == 200 {
				if c := gjson.GetBytes(body, "choices.0.message.content").Str; c != draft {
					t.Fatalf("content %q, want the draft", c)
				}
				return
			}
			if code := gjson.GetBytes(body, "error.code").Str; code != "semantic_validation_failed" {
				t.Fatalf("error %s", body)
			}
			if msg := gjson.GetBytes(body, "error.message").Str; !strings.Contains(msg, "status 500") || !strings.Contains(msg, "closed") {
				t.Fatalf("error message %q", msg)
			}
		})
	}
}

// The judge's own profile: another upstream, its model, temperature, max_tokens and
// timeout.
func TestSemanticJudgeProfile(t *testing.T) {
	t.Parallel()
	judgeScript, err := mockupstream.ParseScript([]byte(dndScript(answerJSON{Content: "not a judge request"},
		map[string]any{"name": "slow", "match": map[string]any{"response_format": "json_schema", "any_message": "Roll initiative"},
			"answer": map[string]any{"content": verdict("approved", "Slow."), "fault": map[string]any{"slow_first_byte": "3s"}}},
		judgeRule("combat", answerJSON{Content: verdict("approved", "They fight.")}),
	)), "judge")
	if err != nil {
		t.Fatal(err)
	}
	judge := mockupstream.New(mockupstream.Options{Script: judgeScript, Record: true})
	if err := judge.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { judge.Close() })

	t.Run("forwarded", func(t *testing.T) {
		t.Parallel()
		script := dndScript(answerJSON{Content: sceneJSON("combat", "Planning")})
		cfg := dndRouteConfig("{validators: [combat], upstream: judge, model: judge-model, temperature: 0.25, max_tokens: 150, timeout: 2s}", "", judge.URL())
		h := newHarness(t, script, cfg)
		if status, _, body := h.post(t, "/v1/chat/completions", sceneRequest(raidChunk), "Authorization", "Bearer the-apps-provider-key"); status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		if k := kinds(h.mock); k != "draft" {
			t.Fatalf("the route's upstream got %q", k)
		}
		if got := h.lastRequest(t).Header.Get("Authorization"); got != "Bearer the-apps-provider-key" {
			t.Fatalf("the route's own upstream got Authorization %q", got)
		}
		var req []byte
		for _, r := range judge.Requests() {
			if strings.Contains(string(r.Body), "Nobody at the camp knows") {
				req = r.Body
				// The app's key belongs to the route's provider: another upstream
				// never receives it.
				if got := r.Header.Get("Authorization"); strings.Contains(got, "the-apps-provider-key") {
					t.Fatalf("the judge upstream received the client's credentials: %q", got)
				}
			}
		}
		if req == nil {
			t.Fatal("the judge upstream got no request")
		}
		for path, want := range map[string]string{"model": `"judge-model"`, "temperature": "0.25", "max_tokens": "150", "stream": "false"} {
			if got := gjson.GetBytes(req, path).Raw; got != want {
				t.Errorf("%s = %s, want %s", path, got, want)
			}
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		script := dndScript(answerJSON{Content: sceneJSON("combat", "Ambush")})
		cfg := dndRouteConfig("{validators: [combat], upstream: judge, model: judge-model, timeout: 100ms, retries: 0}", "", judge.URL())
		h := newHarness(t, script, cfg)
		status, hdr, body := h.post(t, "/v1/chat/completions", sceneRequest(ambushChunk))
		if status != 200 || hdr.Get("X-Factgate-Issues") != "draft=W1;final=W1;delivered=W1" {
			t.Fatalf("status %d, issues %q: %s", status, hdr.Get("X-Factgate-Issues"), body)
		}
		tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
		if !strings.Contains(tr.Get("attempts.0.issues.0.args.error").Str, "within the timeout of 100ms") {
			t.Fatalf("trace: %s", tr.Raw)
		}
	})
}

// When the revision budget, not the client, ends the judge call that checks a
// revision, the trace and the metric say so, and the revision counts as unchecked:
// it passes marked under failure_policy open and never wins over the checked
// draft under closed.
func TestTheRevisionBudgetEndsAJudgeCall(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		policy string
		final  int64 // the attempt the client gets
		issues string
	}{
		{"failure policy open", "open", 1, "draft=C1;final=W1;delivered=W1"},
		{"failure policy closed", "closed", 0, "draft=C1;final=C1;delivered=C1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			draft := sceneJSON("narrative", "At the wagon")
			script := dndScript(answerJSON{Content: draft, Usage: draftUsage},
				judgeRule("narrative", answerJSON{Content: verdict("combat_should_be_added", "Initiative is rolled and attacks are resolved."), Usage: judgeUsage}),
				// The revision's judge answers long after the budget.
				map[string]any{"name": "slow judge", "match": map[string]any{"response_format": "json_schema", "last_user": `(?s)## Proposed kind\s+combat\s*$`},
					"answer": map[string]any{"content": verdict("approved", "Too late."), "fault": map[string]any{"slow_first_byte": "10m"}}},
				revisionRule(answerJSON{Content: sceneJSON("combat", "At the wagon"), Usage: revisionUsage}))
			// A budget far above one loopback revision call; nothing else can end
			// the judge's wait (the upstream's read_timeout and the judge's timeout
			// are minutes), however late a loaded machine fires the budget's timer.
			config := strings.Replace(dndRouteConfig("{validators: [combat], timeout: 5m, failure_policy: "+tc.policy+"}", "{budget: 2s}", ""), "read_timeout: 5s", "read_timeout: 10m", 1)
			h := newHarness(t, script, config)
			status, hdr, body := h.post(t, "/v1/chat/completions", sceneRequest(ambushChunk))
			if status != 200 || hdr.Get("X-Factgate-Issues") != tc.issues {
				t.Fatalf("status %d, X-Factgate-Issues %q, want 200 and %q: %s", status, hdr.Get("X-Factgate-Issues"), tc.issues, body)
			}
			tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
			results := tr.Get("calls.#.result").Raw
			if results != `["ok","budget_exhausted"]` {
				t.Fatalf("judge call results %s, want the draft's ok and the revision's budget_exhausted: %s", results, tr.Raw)
			}
			notes := tr.Get("notes").Raw
			if !strings.Contains(notes, "the revision budget ran out before the judge gave a verdict") || strings.Contains(notes, "went away") {
				t.Fatalf("notes: %s", notes)
			}
			if got := tr.Get("final.attempt").Int(); got != tc.final || !tr.Get("validation_incomplete").Bool() {
				t.Fatalf("final attempt %d, want %d; validation_incomplete %v", got, tc.final, tr.Get("validation_incomplete").Bool())
			}
			resp, err := http.Get(h.base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			m, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, want := range []string{
				`factgate_semantic_calls_total{result="budget_exhausted",route="scenes",validator="combat",variant=""} 1`,
				`factgate_semantic_calls_total{result="ok",route="scenes",validator="combat",variant=""} 1`,
			} {
				if !strings.Contains(string(m), want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			if strings.Contains(string(m), `result="cancelled"`) {
				t.Error("/metrics counts a cancelled judge call")
			}
		})
	}
}
