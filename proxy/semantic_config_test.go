package proxy

import (
	"log/slog"
	"strings"
	"testing"
)

// A semantic block's mistakes surface at start-up, naming the route and the key.
func TestSemanticConfigErrorsSurfaceAtStartUp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		route string
		want  string
	}{
		{"without the validate block", "pack: dnd\n    semantic: {validators: [combat]}",
			"routes[0] (scenes).semantic: a semantic block needs the route's validate block"},
		{"an unknown validator", "pack: dnd\n    validate: {}\n    semantic: {validators: [tone]}",
			`routes[0] (scenes).semantic: validators[0]: pack dnd has no semantic validator "tone" (have combat)`},
		{"an unknown upstream", "pack: dnd\n    validate: {}\n    semantic: {validators: [combat], upstream: judge, model: m}",
			`routes[0] (scenes).semantic: upstream: no upstream named "judge" (have mock)`},
		{"a pack without semantic validators", "pack: ra3\n    validate: {}\n    semantic: {validators: [combat]}",
			"routes[0] (scenes).semantic: pack ra3 declares no semantic validators"},
		{"an unknown key", "pack: dnd\n    validate: {}\n    semantic: {validators: [combat], retry: 3}",
			"routes[0] (scenes).semantic.retry: unknown key (did you mean retries?)"},
		{"an unknown failure policy", "pack: dnd\n    validate: {}\n    semantic: {validators: [combat], failure_policy: sometimes}",
			`unknown policy "sometimes"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			text := "upstreams:\n  mock: {base_url: \"http://127.0.0.1:9/v1\"}\nroutes:\n  - name: scenes\n    models: [scene-writer]\n    upstream: mock\n    " + tc.route + "\n"
			cfg, err := ParseConfig([]byte(text), "scenes.yaml")
			if err == nil {
				_, err = New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// A route with a semantic block and validation switched off starts (an A/B
// variant may turn validation on) and makes no judge call.
func TestSemanticFollowsValidationSwitchedOff(t *testing.T) {
	t.Parallel()
	script := dndScript(answerJSON{Content: sceneJSON("narrative", "Ambush")},
		judgeRule("narrative", answerJSON{Content: verdict("combat_should_be_added", "They fight.")}))
	cfg := strings.Replace(dndRouteConfig("{validators: [combat]}", "", ""), "validate: {}", "validate: {enabled: false}", 1)
	h := newHarness(t, script, cfg)
	if status, _, body := h.post(t, "/v1/chat/completions", sceneRequest(ambushChunk)); status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if k := kinds(h.mock); k != "draft" {
		t.Fatalf("upstream calls %q, want the draft only", k)
	}
}
