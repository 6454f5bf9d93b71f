package semantic

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/validate"
)

func TestJudgeOutcomes(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 601)
	limit := strings.Repeat("b", 600)
	cases := []struct {
		name     string
		chunk    string
		proposed string
		answers  []judgeAnswer
		want     []string // issue keys
		calls    int      // judge calls made (retries: 1)
		contains []string // in the issue's message or recommendation
	}{
		{"approval of a supported combat", ambushChunk, "combat",
			[]judgeAnswer{{content: verdictJSON("approved", "Initiative is rolled and attacks resolved.")}}, nil, 1, nil},
		{"approval of a supported non-combat kind", planChunk, "narrative",
			[]judgeAnswer{{content: verdictJSON("approved", "The party only plans.")}}, nil, 1, nil},
		{"combat should be added", ambushChunk, "narrative",
			[]judgeAnswer{{content: verdictJSON("combat_should_be_added", "Initiative is rolled and a fire bolt hits a goblin.")}},
			[]string{"semantic.rejected|Contradiction|kind"}, 1,
			[]string{`"narrative"`, "must be combat, not narrative", "a fire bolt hits a goblin", "Keep the title and summary accurate"}},
		{"combat should be removed", planChunk, "combat",
			[]judgeAnswer{{content: verdictJSON("combat_should_be_removed", "They plan a raid; nobody attacks.")}},
			[]string{"semantic.rejected|Contradiction|kind"}, 1,
			[]string{`"combat"`, "must be a non-combat kind (narrative, recap or meta), not combat", "nobody attacks"}},
		{"an explanation exactly at the bound", planChunk, "narrative",
			[]judgeAnswer{{content: verdictJSON("approved", limit)}}, nil, 1, nil},
		{"a retry that succeeds", ambushChunk, "combat",
			[]judgeAnswer{{content: "{not json"}, {content: verdictJSON("approved", "Attacks are resolved.")}}, nil, 2, nil},

		// Execution failures: retried once, then a Warning (failure_policy open).
		{"inconsistent: add combat to combat", ambushChunk, "combat",
			[]judgeAnswer{{content: verdictJSON("combat_should_be_added", "It is combat.")}},
			[]string{"semantic.failed|Warning|kind"}, 2, []string{`inconsistent with the proposed kind \"combat\"`}},
		{"inconsistent: remove combat from recap", planChunk, "recap",
			[]judgeAnswer{{content: verdictJSON("combat_should_be_removed", "No fight.")}},
			[]string{"semantic.failed|Warning|kind"}, 2, []string{"inconsistent"}},
		{"malformed JSON", ambushChunk, "combat",
			[]judgeAnswer{{content: `{"verdict": "approved", "explanation": "cut off`}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"not valid JSON"}},
		{"JSON in a fence", ambushChunk, "combat",
			[]judgeAnswer{{content: "```json\n" + verdictJSON("approved", "x") + "\n```"}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"not valid JSON"}},
		{"not an object", ambushChunk, "combat",
			[]judgeAnswer{{content: `["approved"]`}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"not a JSON object"}},
		{"an extra field", ambushChunk, "combat",
			[]judgeAnswer{{content: `{"verdict": "approved", "explanation": "x", "confidence": 0.9}`}}, []string{"semantic.failed|Warning|kind"}, 2, []string{`extra field \"confidence\"`}},
		{"a missing explanation", ambushChunk, "combat",
			[]judgeAnswer{{content: `{"verdict": "approved"}`}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"no explanation"}},
		{"a missing verdict", ambushChunk, "combat",
			[]judgeAnswer{{content: `{"explanation": "x"}`}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"no verdict"}},
		{"a verdict twice", ambushChunk, "combat",
			[]judgeAnswer{{content: `{"verdict": "approved", "verdict": "approved", "explanation": "x"}`}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"twice"}},
		{"a verdict that is not a string", ambushChunk, "combat",
			[]judgeAnswer{{content: `{"verdict": true, "explanation": "x"}`}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"not a string"}},
		{"uncertain is no verdict", ambushChunk, "combat",
			[]judgeAnswer{{content: verdictJSON("uncertain", "Hard to say.")}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"not one of the allowed verdicts"}},
		{"a blank explanation", ambushChunk, "combat",
			[]judgeAnswer{{content: verdictJSON("approved", " \n ")}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"explanation is blank"}},
		{"an over-long explanation", ambushChunk, "combat",
			[]judgeAnswer{{content: verdictJSON("approved", long)}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"601 characters, more than the 600"}},
		{"an empty answer", ambushChunk, "combat",
			[]judgeAnswer{{content: ""}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"empty"}},
		{"a refusal", ambushChunk, "combat",
			[]judgeAnswer{{refusal: "I can't help with violent content."}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"refused"}},
		{"a server error", ambushChunk, "combat",
			[]judgeAnswer{{status: 500, body: `{"error":{"message":"overloaded"}}`}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"status 500"}},
		{"a body that is not JSON", ambushChunk, "combat",
			[]judgeAnswer{{body: "<html>bad gateway</html>", status: 502}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"not JSON"}},
		{"an answer nested too deep", ambushChunk, "combat",
			[]judgeAnswer{{body: `{"choices":[{"message":{"content":"x"}}],"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"deeper than server.max_json_depth"}},
		{"content nested too deep", ambushChunk, "combat",
			[]judgeAnswer{{content: `{"verdict": "approved", "explanation": ` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"deeper than server.max_json_depth"}},
		{"a transport error", ambushChunk, "combat",
			[]judgeAnswer{{err: errConnRefused}}, []string{"semantic.failed|Warning|kind"}, 2, []string{"connection refused"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newFake(tc.answers...)
			ex := exchange(tc.chunk, up)
			v := newCombat(t, Config{Validators: []string{"combat"}}.Settings())
			issues, err := v.ValidateAnswer(context.Background(), ex, scene(tc.proposed))
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(issues); !slices.Equal(got, tc.want) {
				t.Fatalf("issues = %v, want %v", got, tc.want)
			}
			if up.calls() != tc.calls {
				t.Fatalf("%d judge calls, want %d", up.calls(), tc.calls)
			}
			failed := len(issues) == 1 && issues[0].Code == CodeFailed
			if got := ex.Trace.ValidationIncomplete; got != failed {
				t.Fatalf("ValidationIncomplete = %v, want %v", got, failed)
			}
			if len(issues) == 1 {
				is := issues[0]
				if is.Validator != "semantic/combat" || is.Message == "" {
					t.Fatalf("issue %+v", is)
				}
				text := is.Message + "\n" + is.Recommendation.Text + "\n" + mustJSON(is.Args)
				for _, w := range tc.contains {
					if !strings.Contains(text, w) {
						t.Errorf("%q lacks %q", text, w)
					}
				}
			}
			// Every call's usage counts, failed ones included.
			if want := up.billed; ex.Usage.TotalTokens != want {
				t.Errorf("usage %d tokens, want %d", ex.Usage.TotalTokens, want)
			}
		})
	}
}

func TestFailurePolicyAndRetryBudget(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		cfg      Config
		calls    int
		severity interceptors.Severity
	}{
		{"open with the default budget", Config{}, 2, interceptors.Warning},
		{"no retry", Config{Retries: ptr(0)}, 1, interceptors.Warning},
		{"three retries", Config{Retries: ptr(3)}, 4, interceptors.Warning},
		{"closed", Config{FailurePolicy: FailClosed}, 2, interceptors.Fatal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newFake(judgeAnswer{status: 503, body: `{"error":{"message":"busy"}}`})
			ex := exchange(ambushChunk, up)
			issues, err := newCombat(t, tc.cfg.Settings()).ValidateAnswer(context.Background(), ex, scene("combat"))
			if err != nil {
				t.Fatal(err)
			}
			if len(issues) != 1 || issues[0].Code != CodeFailed || issues[0].Severity != tc.severity {
				t.Fatalf("issues = %v", keys(issues))
			}
			if up.calls() != tc.calls {
				t.Fatalf("%d calls, want %d", up.calls(), tc.calls)
			}
			if !strings.Contains(issues[0].Message, "could not run") || !ex.Trace.ValidationIncomplete {
				t.Fatalf("message %q, incomplete %v", issues[0].Message, ex.Trace.ValidationIncomplete)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// The judge request is the strict contract: nothing but the policy, the
// instruction, the chunk and the proposed kind, stable content first.
func TestJudgeRequestIsTheStrictContract(t *testing.T) {
	t.Parallel()
	up := newFake()
	ex := exchange(ambushChunk, up)
	v := newCombat(t, Config{Validators: []string{"combat"}}.Settings())
	if _, err := v.ValidateAnswer(context.Background(), ex, scene("narrative")); err != nil {
		t.Fatal(err)
	}
	body := up.request(0)
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var top []string
	for k := range req {
		top = append(top, k)
	}
	slices.Sort(top)
	if want := []string{"messages", "model", "response_format", "stream", "temperature"}; !slices.Equal(top, want) {
		t.Fatalf("request fields %v, want %v", top, want)
	}
	var rf any
	_ = json.Unmarshal(req["response_format"], &rf)
	wantRF := map[string]any{
		"type": "json_schema",
		"json_schema": map[string]any{
			"name":   "verdict",
			"strict": true,
			"schema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"verdict":     map[string]any{"type": "string", "enum": []any{"approved", "combat_should_be_added", "combat_should_be_removed"}},
					"explanation": map[string]any{"type": "string"},
				},
				"required":             []any{"verdict", "explanation"},
				"additionalProperties": false,
			},
		},
	}
	if !reflect.DeepEqual(rf, wantRF) {
		t.Fatalf("response_format = %s", req["response_format"])
	}
	if strings.Contains(string(req["response_format"]), "uniqueItems") {
		t.Fatal("the schema uses uniqueItems")
	}

	msgs := gjson.GetBytes(body, "messages").Array()
	if len(msgs) != 2 || msgs[0].Get("role").Str != "system" || msgs[1].Get("role").Str != "user" {
		t.Fatalf("messages = %s", gjson.GetBytes(body, "messages").Raw)
	}
	spec := dndPack(t).Semantic[0]
	system, user := msgs[0].Get("content").Str, msgs[1].Get("content").Str
	if !strings.HasPrefix(system, spec.PolicyText) {
		t.Fatal("the system message does not start with the policy asset byte for byte")
	}
	if !strings.Contains(system, strings.TrimSpace(spec.InstructionText)) {
		t.Fatal("the system message lacks the instruction")
	}
	if !strings.Contains(user, strings.TrimRight(ambushChunk, "\n")) || !strings.HasSuffix(user, "## Proposed kind\n\nnarrative\n") {
		t.Fatalf("user message = %q", user)
	}
	for _, forbidden := range []string{
		"d01_goblin_ambush", "sha256:9f2c1e", "campaign-7", "chunk_id", ex.Trace.ID,
		"semantic/", CodeRejected, CodeFailed, "validator",
	} {
		if strings.Contains(string(body), forbidden) {
			t.Errorf("the judge request contains %q", forbidden)
		}
	}

	// The prefix is the same for any input: only the last message varies.
	up2 := newFake()
	if _, err := v.ValidateAnswer(context.Background(), exchange(planChunk, up2), scene("combat")); err != nil {
		t.Fatal(err)
	}
	if other := gjson.GetBytes(up2.request(0), "messages.0.content").Str; other != system {
		t.Fatal("the system message differs between inputs")
	}
}

func TestProfileIsForwarded(t *testing.T) {
	t.Parallel()
	t.Run("the route's upstream and model by default", func(t *testing.T) {
		t.Parallel()
		up := newFake()
		ex := exchange(ambushChunk, up)
		if _, err := newCombat(t, Config{}.Settings()).ValidateAnswer(context.Background(), ex, scene("combat")); err != nil {
			t.Fatal(err)
		}
		req := up.request(0)
		if m := gjson.GetBytes(req, "model").Str; m != "deepseek-chat" {
			t.Errorf("model %q, want the route's upstream model", m)
		}
		if tt := gjson.GetBytes(req, "temperature"); tt.Raw != "0" {
			t.Errorf("temperature %s, want 0", tt.Raw)
		}
		if gjson.GetBytes(req, "max_tokens").Exists() {
			t.Error("max_tokens sent without a setting")
		}
		if left := up.left[0]; left <= 19*time.Second || left > DefaultTimeout {
			t.Errorf("the call's deadline is %s away, want the default %s", left, DefaultTimeout)
		}
	})
	t.Run("a named upstream, model, temperature, max_tokens and timeout", func(t *testing.T) {
		t.Parallel()
		route, judge := newFake(), newFake()
		ex := exchange(ambushChunk, route)
		var asked []string
		ex.UpstreamNamed = func(name string) (interceptors.Upstream, bool) {
			asked = append(asked, name)
			return judge, name == "judge"
		}
		cfg := Config{Upstream: "judge", Model: "gpt-judge", Temperature: ptr(0.3), MaxTokens: 200, Timeout: 7_000_000_000}
		if _, err := newCombat(t, cfg.Settings()).ValidateAnswer(context.Background(), ex, scene("combat")); err != nil {
			t.Fatal(err)
		}
		if route.calls() != 0 || judge.calls() != 1 || !slices.Equal(asked, []string{"judge"}) {
			t.Fatalf("route calls %d, judge calls %d, asked %v", route.calls(), judge.calls(), asked)
		}
		req := judge.request(0)
		if m := gjson.GetBytes(req, "model").Str; m != "gpt-judge" {
			t.Errorf("model %q", m)
		}
		if tt := gjson.GetBytes(req, "temperature").Float(); tt != 0.3 {
			t.Errorf("temperature %v", tt)
		}
		if mt := gjson.GetBytes(req, "max_tokens").Int(); mt != 200 {
			t.Errorf("max_tokens %d", mt)
		}
		if left := judge.left[0]; left <= 6*time.Second || left > 7*time.Second {
			t.Errorf("the call's deadline is %s away, want 7s", left)
		}
	})
	t.Run("a call that outlives the timeout is an execution failure", func(t *testing.T) {
		t.Parallel()
		up := newFake(judgeAnswer{block: true})
		ex := exchange(ambushChunk, up)
		cfg := Config{Timeout: 20_000_000, Retries: ptr(0)} // 20ms
		issues, err := newCombat(t, cfg.Settings()).ValidateAnswer(context.Background(), ex, scene("combat"))
		if err != nil {
			t.Fatal(err)
		}
		if len(issues) != 1 || issues[0].Code != CodeFailed || !strings.Contains(issues[0].Args["error"], "within the timeout of 20ms") {
			t.Fatalf("issues = %+v", issues)
		}
	})
}

func TestMissingInputFailsWithoutACall(t *testing.T) {
	t.Parallel()
	spec := dndPack(t).Semantic[0]
	cases := []struct {
		name    string
		ex      func(up *fakeUpstream) *interceptors.Exchange
		content string
		reason  string
	}{
		{"no JSON object", func(up *fakeUpstream) *interceptors.Exchange { return exchange(ambushChunk, up) }, "a combat scene", "no single JSON object"},
		{"no kind", func(up *fakeUpstream) *interceptors.Exchange { return exchange(ambushChunk, up) }, `{"title": "T", "summary": "S"}`, `no "kind"`},
		{"a numeric kind", func(up *fakeUpstream) *interceptors.Exchange { return exchange(ambushChunk, up) }, `{"kind": 1}`, "not a non-empty string"},
		{"no user message", func(up *fakeUpstream) *interceptors.Exchange {
			ex := exchange(ambushChunk, up)
			ex.Original = []byte(`{"model":"m","messages":[{"role":"system","content":"hi"}]}`)
			return ex
		}, scene("combat"), "no user message"},
		{"a blank chunk", func(up *fakeUpstream) *interceptors.Exchange { return exchange("  \n", up) }, scene("combat"), "source text is empty"},
		{"a chunk over the bound", func(up *fakeUpstream) *interceptors.Exchange {
			return exchange(strings.Repeat("DM: The goblin swings.\n", MaxSourceBytes/20), up)
		}, scene("combat"), "more than the"},
		{"no upstream outside the proxy", func(up *fakeUpstream) *interceptors.Exchange {
			ex := exchange(ambushChunk, up)
			ex.Upstream = nil
			return ex
		}, scene("combat"), "no upstream to call"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newFake()
			ex := tc.ex(up)
			issues, err := newCombat(t, Config{}.Settings()).ValidateAnswer(context.Background(), ex, tc.content)
			if err != nil {
				t.Fatal(err)
			}
			if len(issues) != 1 || issues[0].Code != CodeFailed || issues[0].Path != spec.Proposed {
				t.Fatalf("issues = %v", keys(issues))
			}
			if !strings.Contains(issues[0].Args["error"], tc.reason) {
				t.Fatalf("error %q lacks %q", issues[0].Args["error"], tc.reason)
			}
			if up.calls() != 0 {
				t.Fatalf("%d judge calls for missing input", up.calls())
			}
		})
	}
}

func TestSourceRuleNarrowsTheText(t *testing.T) {
	t.Parallel()
	p := *dndPack(t)
	p.Semantic = slices.Clone(p.Semantic)
	p.Semantic[0].Source.Re = regexp.MustCompile(`(?s)<chunk>\n(?P<value>.*)</chunk>`)
	v, err := NewValidator(&p, "combat", Config{}.Settings())
	if err != nil {
		t.Fatal(err)
	}
	up := newFake()
	ex := exchange("Describe this chunk (id d01, hash 9f2c).\n<chunk>\n"+ambushChunk+"</chunk>", up)
	if _, err := v.ValidateAnswer(context.Background(), ex, scene("combat")); err != nil {
		t.Fatal(err)
	}
	user := gjson.GetBytes(up.request(0), "messages.1.content").Str
	if strings.Contains(user, "9f2c") || strings.Contains(user, "<chunk>") || !strings.Contains(user, "Roll initiative") {
		t.Fatalf("user message = %q", user)
	}
}

func TestGuidanceIsBounded(t *testing.T) {
	t.Parallel()
	explanation := strings.Repeat("Initiative is rolled and the goblins attack. ", 13) // ~585 characters
	up := newFake(judgeAnswer{content: verdictJSON("combat_should_be_added", "Line one.\n\n"+explanation)})
	ex := exchange(ambushChunk, up)
	issues, err := newCombat(t, Config{}.Settings()).ValidateAnswer(context.Background(), ex, scene("meta"))
	if err != nil || len(issues) != 1 {
		t.Fatalf("issues %v, err %v", keys(issues), err)
	}
	quoted := issues[0].Args["explanation"]
	if n := utf8.RuneCountInString(quoted); n > MaxGuidanceExplanation || !strings.HasSuffix(quoted, "…") {
		t.Fatalf("explanation of %d characters: %q", n, quoted)
	}
	if strings.Contains(issues[0].Recommendation.Text, "\n") || !strings.HasPrefix(quoted, "Line one. Initiative") {
		t.Fatalf("recommendation %q", issues[0].Recommendation.Text)
	}
}

// The exchange runs deterministic validators first and no LLM-backed one when one
// of them found something Fatal: a malformed answer costs no judge call.
func TestNoJudgeCallForAFatalAnswer(t *testing.T) {
	t.Parallel()
	shape, err := validate.NewShapeValidator(dndPack(t))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		content string
		calls   int
		want    []string
	}{
		{"prose", "A goblin ambush; definitely combat.", 0, []string{"answer.missing|Fatal|"}},
		{"a kind outside the enum", `{"kind": "battle", "title": "T", "summary": "S"}`, 0, []string{"answer.enum_invalid|Fatal|kind"}},
		{"a missing summary", `{"kind": "combat", "title": "T"}`, 0, []string{"answer.field_missing|Fatal|summary"}},
		{"a well-formed scene", scene("combat"), 1, nil},
		{"a warning does not stop the judge", "Here you go:\n" + scene("combat"), 1, []string{"answer.extra_text|Warning|"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newFake()
			ex := exchange(ambushChunk, up)
			// The semantic stage registers before validate (chain order); the
			// exchange still runs the shape first.
			ex.Validators = []interceptors.AnswerValidator{newCombat(t, Config{}.Settings()), shape}
			issues, errs := ex.ValidateAnswer(context.Background(), tc.content)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if got := keys(issues); !slices.Equal(got, tc.want) {
				t.Fatalf("issues = %v, want %v", got, tc.want)
			}
			if up.calls() != tc.calls {
				t.Fatalf("%d judge calls, want %d", up.calls(), tc.calls)
			}
		})
	}
}

func TestTheCandidateIsNotModified(t *testing.T) {
	t.Parallel()
	for _, verdict := range []string{"approved", "combat_should_be_added"} {
		t.Run(verdict, func(t *testing.T) {
			t.Parallel()
			up := newFake(judgeAnswer{content: verdictJSON(verdict, "Attacks are resolved.")})
			ex := exchange(ambushChunk, up)
			draft := "```json\n" + scene("narrative") + "\n```"
			ex.Response = &interceptors.Response{Status: 200, Body: []byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":` + mustJSON(draft) + `}}],"usage":{"total_tokens":5}}`)}
			before := [][]byte{clone(ex.Response.Body), clone(ex.Body), clone(ex.Original)}
			content := ex.Response.Content()
			ex.Validators = []interceptors.AnswerValidator{newCombat(t, Config{}.Settings())}
			if _, errs := ex.ValidateAnswer(context.Background(), content); len(errs) > 0 {
				t.Fatal(errs)
			}
			for i, after := range [][]byte{ex.Response.Body, ex.Body, ex.Original} {
				if string(after) != string(before[i]) {
					t.Fatalf("validation changed %s", [...]string{"the response", "the outgoing request", "the client's request"}[i])
				}
			}
			if ex.Response.Content() != draft {
				t.Fatal("the answer changed")
			}
		})
	}
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// Who ended a judge call decides what it means: a client that went away ends the
// validation without an issue (nobody is waiting for it), while the revision
// budget leaves the revision unchecked — an execution failure per the failure
// policy, not retried — and the trace and the metric say which it was.
func TestTheJudgeCallsEndingIsNamed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		policy  FailurePolicy
		end     func(ctx context.Context, started func() bool) (context.Context, context.CancelFunc)
		issues  []string
		err     bool
		result  string
		note    string
		notNote string
	}{
		{
			name:   "the client went away",
			policy: FailOpen,
			end: func(ctx context.Context, started func() bool) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(ctx)
				go func() {
					for !started() {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}()
				return ctx, cancel
			},
			err: true, result: ResultCancelled,
			note: "the client went away during the judge call", notNote: "budget",
		},
		{
			name:   "the revision budget ran out, failure policy open",
			policy: FailOpen,
			end:    budget,
			issues: []string{"semantic.failed|Warning|kind"}, result: ResultBudgetExhausted,
			note: "the revision budget ran out before the judge gave a verdict", notNote: "went away",
		},
		{
			name:   "the revision budget ran out, failure policy closed",
			policy: FailClosed,
			end:    budget,
			issues: []string{"semantic.failed|Fatal|kind"}, result: ResultBudgetExhausted,
			note: "the revision budget ran out before the judge gave a verdict", notNote: "went away",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			d := deps(t, dndPack(t))
			d.Metrics = reg
			s, err := New(Config{Validators: []string{"combat"}, FailurePolicy: tc.policy, RouteValidates: true}, d)
			if err != nil {
				t.Fatal(err)
			}
			up := newFake(judgeAnswer{block: true})
			ex := exchange(ambushChunk, up)
			ctx, cancel := tc.end(context.Background(), func() bool { return up.calls() > 0 })
			defer cancel()
			issues, err := s.Validators()[0].ValidateAnswer(ctx, ex, scene("combat"))
			if got := keys(issues); (err != nil) != tc.err || !slices.Equal(got, tc.issues) {
				t.Fatalf("issues %v, err %v; want %v, an error: %v", got, err, tc.issues, tc.err)
			}
			if up.calls() != 1 {
				t.Fatalf("%d judge calls, want 1 (no retry once the call was ended)", up.calls())
			}
			tr := ex.Trace
			if len(tr.Calls) != 1 || tr.Calls[0].Result != tc.result || tr.Calls[0].Kind != "judge" || tr.Calls[0].Validator != "semantic/combat" {
				t.Fatalf("trace calls %+v, want one judge call ending %s", tr.Calls, tc.result)
			}
			notes := strings.Join(tr.Notes, "\n")
			if !strings.Contains(notes, tc.note) || strings.Contains(notes, tc.notNote) {
				t.Fatalf("notes %q: want %q, not %q", notes, tc.note, tc.notNote)
			}
			if tc.result == ResultBudgetExhausted && !tr.ValidationIncomplete {
				t.Fatal("the trace does not say validation is incomplete")
			}
			for _, r := range []string{ResultCancelled, ResultBudgetExhausted} {
				want := 0.0
				if r == tc.result {
					want = 1
				}
				if got := counted(t, reg, "factgate_semantic_calls_total", map[string]string{"result": r}); got != want {
					t.Errorf("factgate_semantic_calls_total{result=%q} = %v, want %v", r, got, want)
				}
			}
		})
	}
}

// budget is a revision budget that runs out while the judge call waits.
func budget(ctx context.Context, _ func() bool) (context.Context, context.CancelFunc) {
	return context.WithDeadlineCause(ctx, time.Now().Add(50*time.Millisecond), interceptors.ErrBudgetExhausted)
}

// A budget spent before the judge is called costs no call.
func TestASpentBudgetCostsNoJudgeCall(t *testing.T) {
	t.Parallel()
	up := newFake()
	ex := exchange(ambushChunk, up)
	ctx, cancel := context.WithDeadlineCause(context.Background(), time.Now().Add(-time.Second), interceptors.ErrBudgetExhausted)
	defer cancel()
	issues, err := newCombat(t, Config{}.Settings()).ValidateAnswer(ctx, ex, scene("combat"))
	if err != nil || !slices.Equal(keys(issues), []string{"semantic.failed|Warning|kind"}) || up.calls() != 0 || len(ex.Trace.Calls) != 0 {
		t.Fatalf("issues %v, err %v, %d calls, trace calls %+v", keys(issues), err, up.calls(), ex.Trace.Calls)
	}
}

func TestBound(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short", "two words", 20, "two words"},
		{"at a word", "the goblins attack the wagon", 20, "the goblins attack…"},
		{"no space near the end", strings.Repeat("x", 30), 10, strings.Repeat("x", 9) + "…"},
		{"runes, not bytes", "火球术命中哥布林造成八点伤害", 5, "火球术命…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := bound(tc.in, tc.n); got != tc.want {
				t.Fatalf("bound(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
}

func BenchmarkValidateAnswer(b *testing.B) {
	v := newCombat(b, Config{}.Settings())
	up := newFake(judgeAnswer{content: verdictJSON("approved", "Initiative is rolled and attacks are resolved.")})
	content := scene("combat")
	b.ReportAllocs()
	for b.Loop() {
		up.mu.Lock()
		up.requests, up.left = up.requests[:0], up.left[:0]
		up.mu.Unlock()
		ex := exchange(ambushChunk, up)
		if issues, err := v.ValidateAnswer(context.Background(), ex, content); err != nil || len(issues) != 0 {
			b.Fatal(issues, err)
		}
	}
}
