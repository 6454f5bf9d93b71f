package semantic

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

func deps(tb testing.TB, pack *knowledge.Pack) interceptors.Deps {
	return interceptors.Deps{Route: "scenes", Pack: pack, Upstreams: []string{"judge", "provider"}}
}

// decode reads a semantic block as the proxy does: strictly.
func decode(tb testing.TB, text string) (Config, error) {
	tb.Helper()
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader([]byte(text)))
	dec.KnownFields(true)
	err := dec.Decode(&c)
	return c, err
}

func TestNewRejectsEveryConfigProblem(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		yaml string
		pack func(tb testing.TB) *knowledge.Pack
		want string
	}{
		{"no validators", "{}", dndPack, "validators: name at least one"},
		{"an unknown validator", "validators: [combat, tone]", dndPack, `validators[1]: pack dnd has no semantic validator "tone" (have combat)`},
		{"a validator twice", "validators: [combat, combat]", dndPack, `validators[1]: "combat" is listed twice`},
		{"an unknown upstream", "{validators: [combat], upstream: judges, model: m}", dndPack, `upstream: no upstream named "judges" (have judge, provider)`},
		{"an upstream without a model", "{validators: [combat], upstream: judge}", dndPack, "model: required when upstream names another upstream"},
		{"a temperature out of range", "{validators: [combat], temperature: 3}", dndPack, "temperature: 3 is out of range"},
		{"a negative temperature", "{validators: [combat], temperature: -0.5}", dndPack, "temperature: -0.5 is out of range"},
		{"a timeout out of range", "{validators: [combat], timeout: 10m}", dndPack, "timeout: 10m0s is out of range"},
		{"negative max_tokens", "{validators: [combat], max_tokens: -1}", dndPack, "max_tokens: -1 is negative"},
		{"too many retries", "{validators: [combat], retries: 9}", dndPack, "retries: 9 is out of range (0 to 5)"},
		{"no pack", "validators: [combat]", func(testing.TB) *knowledge.Pack { return nil }, "need the route's pack"},
		{"a pack without semantic validators", "validators: [combat]", func(tb testing.TB) *knowledge.Pack {
			p := *dndPack(tb)
			p.Semantic = nil
			return &p
		}, "pack dnd declares no semantic validators"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := decode(t, tc.yaml)
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(cfg, deps(t, tc.pack(t)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestConfigDecodesStrictly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		yaml string
		want string
	}{
		{"an unknown key", "{validators: [combat], retry: 2}", "field retry not found"},
		{"an unknown policy", "{validators: [combat], failure_policy: maybe}", `unknown policy "maybe" (want open or closed)`},
		{"a bad duration", "{validators: [combat], timeout: soon}", "soon"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := decode(t, tc.yaml)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSettingsDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := decode(t, "validators: [combat]")
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Settings()
	want := Settings{Timeout: DefaultTimeout, Retries: 1, FailurePolicy: FailOpen}
	if got != want {
		t.Fatalf("settings = %+v, want %+v", got, want)
	}
	cfg, err = decode(t, "{validators: [combat], upstream: judge, model: gpt-judge, temperature: 0.2, timeout: 3s, max_tokens: 100, retries: 0, failure_policy: closed}")
	if err != nil {
		t.Fatal(err)
	}
	got = cfg.Settings()
	want = Settings{Upstream: "judge", Model: "gpt-judge", Temperature: 0.2, Timeout: 3_000_000_000, MaxTokens: 100, Retries: 0, FailurePolicy: FailClosed}
	if got != want {
		t.Fatalf("settings = %+v, want %+v", got, want)
	}
}

func TestStageRegistersOnlyWhenTheRequestIsValidated(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	cases := []struct {
		name           string
		routeValidates bool
		override       *bool
		registered     bool
	}{
		{"the route validates", true, nil, true},
		{"the route does not validate", false, nil, false},
		{"a variant turns validation off", true, &no, false},
		{"a variant turns validation on", false, &yes, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(Config{Validators: []string{"combat"}, RouteValidates: tc.routeValidates}, deps(t, dndPack(t)))
			if err != nil {
				t.Fatal(err)
			}
			ex := exchange(ambushChunk, newFake())
			ex.Overrides.Validate = tc.override
			if err := s.OnRequest(context.Background(), ex); err != nil {
				t.Fatal(err)
			}
			if got := len(ex.Validators) == 1 && ex.Validators[0].Name() == "semantic/combat" && ex.Validators[0].LLMBacked(); got != tc.registered {
				t.Fatalf("registered = %v (%d validators), want %v", got, len(ex.Validators), tc.registered)
			}
		})
	}
}

// Under failure_policy closed a draft the judge could not check fails the request;
// under open it passes.
func TestFailClosedEndsTheRequest(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		policy FailurePolicy
		answer judgeAnswer
		status int // 0: the request goes on
	}{
		{"open", FailOpen, judgeAnswer{status: 500, body: `{"error":{"message":"down"}}`}, 0},
		{"closed, a failed call", FailClosed, judgeAnswer{status: 500, body: `{"error":{"message":"down"}}`}, 502},
		{"closed, a timeout", FailClosed, judgeAnswer{block: true}, 504},
		{"closed, a valid rejection", FailClosed, judgeAnswer{content: verdictJSON("combat_should_be_added", "They fight.")}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Validators: []string{"combat"}, RouteValidates: true, FailurePolicy: tc.policy, Timeout: 20_000_000}
			s, err := New(cfg, deps(t, dndPack(t)))
			if err != nil {
				t.Fatal(err)
			}
			ex := exchange(ambushChunk, newFake(tc.answer))
			if err := s.OnRequest(context.Background(), ex); err != nil {
				t.Fatal(err)
			}
			ex.Response = &interceptors.Response{Status: 200, Body: []byte(`{"choices":[{"message":{"content":` + mustJSON(scene("narrative")) + `}}]}`)}
			ex.DraftIssues, _ = ex.ValidateAnswer(context.Background(), ex.Response.Content())
			ex.Issues = ex.DraftIssues
			err = s.OnResponse(context.Background(), ex)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			e := interceptors.AsError(err)
			if e == nil || e.Status != tc.status || e.Code != ErrorCode || !strings.Contains(e.Message, "combat") || !strings.Contains(e.Message, "failure_policy: closed") {
				t.Fatalf("err = %#v", err)
			}
		})
	}
}

func TestMetricsCountOutcomesCallsAndTokens(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	d := deps(t, dndPack(t))
	d.Metrics = reg
	s, err := New(Config{Validators: []string{"combat"}, RouteValidates: true}, d)
	if err != nil {
		t.Fatal(err)
	}
	v := s.Validators()[0]
	for _, a := range [][]judgeAnswer{
		{{content: verdictJSON("approved", "Fight.")}},
		{{content: "nope"}, {content: verdictJSON("combat_should_be_added", "Fight.")}},
		{{err: errConnRefused}},
	} {
		if _, err := v.ValidateAnswer(context.Background(), exchange(ambushChunk, newFake(a...)), scene("narrative")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"factgate_semantic_validations_total", map[string]string{"outcome": "approved"}, 1},
		{"factgate_semantic_validations_total", map[string]string{"outcome": "rejected"}, 1},
		{"factgate_semantic_validations_total", map[string]string{"outcome": "failed"}, 1},
		{"factgate_semantic_calls_total", map[string]string{"result": "ok"}, 2},
		{"factgate_semantic_calls_total", map[string]string{"result": "failed"}, 3},
		{"factgate_semantic_tokens_total", nil, 3 * 320},
	} {
		if got := counted(t, reg, c.metric, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.metric, c.labels, got, c.want)
		}
	}
}

// counted reads a counter of route "scenes", validator "combat" with labels.
func counted(tb testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["route"] != "scenes" || got["validator"] != "combat" {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
