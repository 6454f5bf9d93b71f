package proxy

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

const limitsConfig = `
server: {max_header_size: 4KiB}
upstreams:
  mock: {base_url: "%MOCK%", max_concurrent: 1, connect_timeout: 200ms, read_timeout: 5s}
routes:
  - {name: default, default: true, upstream: mock}
`

// TestHeaderSizeAndConcurrencyLimits: headers over server.max_header_size get 431
// headers_too_large; a request that finds max_concurrent taken for the whole
// connect timeout gets 503 upstream_saturated; both in the OpenAI envelope, and the
// proxy keeps serving.
func TestHeaderSizeAndConcurrencyLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
rules:
  - match: {model: slow}
    answer: {content: "slow answer", latency: 1500ms}
default: {content: "quick answer"}
`, limitsConfig)
	body := `{"model":"m","messages":[{"role":"user","content":"q"}]}`

	status, _, resp := h.post(t, "/v1/chat/completions", body, "X-Big", strings.Repeat("a", 5000))
	e := gjson.GetBytes(resp, "error")
	if status != 431 || e.Get("code").Str != "headers_too_large" || !strings.Contains(e.Get("message").Str, "max_header_size") || !e.Get("type").Exists() {
		t.Fatalf("oversized headers: %d %s", status, resp)
	}
	if status, _, resp := h.post(t, "/v1/chat/completions", body); status != 200 {
		t.Fatalf("after the 431 the proxy stopped serving: %d %s", status, resp)
	}

	// One slow request holds the only upstream slot; a second one waits for the
	// connect timeout (200ms) and is refused.
	var wg sync.WaitGroup
	slowStatus := 0
	wg.Go(func() {
		req, _ := http.NewRequest("POST", h.base+"/v1/chat/completions", strings.NewReader(`{"model":"slow","messages":[{"role":"user","content":"q"}]}`))
		r, err := http.DefaultClient.Do(req)
		if err == nil {
			slowStatus = r.StatusCode
			r.Body.Close()
		}
	})
	// The slow request holds the slot once it is at the mock (the one request
	// before it there was the quick one after the 431), for 1.5s from then.
	if err := h.mock.WaitForStarted(2, 10*time.Second); err != nil {
		t.Fatalf("the slow request never reached the upstream: %v", err)
	}
	status, _, resp = h.post(t, "/v1/chat/completions", body)
	if status != 503 || gjson.GetBytes(resp, "error.code").Str != "upstream_saturated" {
		t.Fatalf("a request over max_concurrent: %d %s", status, resp)
	}
	wg.Wait()
	if slowStatus != 200 {
		t.Fatalf("the slow request that held the slot ended with %d", slowStatus)
	}
	if status, _, resp := h.post(t, "/v1/chat/completions", body); status != 200 {
		t.Fatalf("after the 503 the proxy stopped serving: %d %s", status, resp)
	}
}
