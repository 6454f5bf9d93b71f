package proxy

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestInvalidOverlayShowsOnReadyzAndKeepsTheLastGoodVersion: a domain expert saves
// a valid overlay, then a broken one, then fixes it. While it is broken, /readyz
// says degraded and names the overlay file and the problem, requests still succeed
// and carry the last good version; once fixed, /readyz is ready again and the next
// request carries the fix.
func TestInvalidOverlayShowsOnReadyzAndKeepsTheLastGoodVersion(t *testing.T) {
	t.Parallel()
	h, overlay := newInjectHarness(t)
	entry := func(text string) string {
		return `{"factions": {"神州": {"entries": [{"id": "CelestialMCV", "tags": ["vehicle", "builder"], "text": "### CelestialMCV：青龙战斗核心舰\n- ` + text + `"}]}}}`
	}
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(overlay, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	promptHas := func(fact string) bool {
		t.Helper()
		if status, _, resp := h.post(t, "/v1/chat/completions", coronaRequest(t, "ra3-analyst", "")); status != 200 {
			t.Fatalf("request failed: %d %s", status, resp)
		}
		prompt, _ := upstreamPrompt(t, h)
		return strings.Contains(prompt, fact)
	}
	ready := func() gjson.Result { return gjson.Parse(injectReadyz(h)) }
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; /readyz: %s", what, injectReadyz(h))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	const good, fixed = "专家第一版：可以在水面展开。", "专家第二版：只能在陆地展开。"
	write(entry(good))
	waitUntil("the first overlay to reach the prompt", func() bool { return promptHas(good) })
	if r := ready(); r.Get("status").Str != "ready" || !r.Get("checks.knowledge.ok").Bool() {
		t.Fatalf("/readyz with a valid overlay: %s", r.Raw)
	}

	// Broken: an unknown tag.
	write(`{"factions": {"神州": {"entries": [{"id": "CelestialMCV", "tags": ["flying"], "text": "坏"}]}}}`)
	waitUntil("/readyz to report the invalid overlay", func() bool {
		r := ready()
		return r.Get("status").Str == "degraded" && strings.Contains(r.Get("checks.knowledge.detail").Str, "unknown tag")
	})
	r := ready()
	detail := r.Get("checks.knowledge.detail").Str
	if r.Get("checks.knowledge.ok").Bool() || !strings.Contains(detail, "ra3-corona.overlay.json") || !strings.Contains(detail, `unknown tag "flying"`) {
		t.Fatalf("/readyz does not name the overlay and its problem: %s", r.Raw)
	}
	if !promptHas(good) {
		t.Fatal("with a broken overlay, the request lost the last good version")
	}

	// Fixed.
	write(entry(fixed))
	waitUntil("/readyz to be ready again", func() bool { return ready().Get("status").Str == "ready" })
	if !promptHas(fixed) || promptHas(good) {
		t.Fatal("the fixed overlay did not replace the last good version")
	}
}
