package proxy

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// WithInnermostStage runs a stage after the route's own: its request phase last
// (here it answers in the upstream's place), its response phase first.
func TestWithInnermostStage(t *testing.T) {
	t.Parallel()
	log := &orderLog{}
	h := newHarness(t, "", clientConfig,
		WithChain("held", &orderPhase{name: "outer", log: log}),
		WithInnermostStage("held", &orderPhase{name: "innermost", log: log, stop: true}))
	status, _, body := h.post(t, "/v1/chat/completions", `{"model":"held","messages":[{"role":"user","content":"q"}]}`, "X-Stop", "innermost")
	if status != 200 || gjson.GetBytes(body, "choices.0.message.content").Str != "answered by innermost" {
		t.Fatalf("status %d: %s", status, body)
	}
	if got, want := log.take(), []string{"request outer", "request innermost", "response innermost", "response outer"}; !slices.Equal(got, want) {
		t.Fatalf("phases %v, want %v", got, want)
	}
	if n := h.chatRequests(); n != 0 {
		t.Fatalf("the upstream got %d requests; the innermost stage answered", n)
	}
	// Other routes keep their chains.
	if status, _, _ := h.post(t, "/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"q"}]}`); status != 200 || len(log.take()) != 0 || h.chatRequests() != 1 {
		t.Fatalf("the plain route: status %d", status)
	}
	cfg, err := ParseConfig([]byte(strings.ReplaceAll(clientConfig, "%MOCK%", "http://127.0.0.1:9/v1")), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, WithInnermostStage("nope", &orderPhase{name: "x", log: log})); err == nil || !strings.Contains(err.Error(), `no route named "nope"`) {
		t.Fatalf("an unknown route: %v", err)
	}
}
