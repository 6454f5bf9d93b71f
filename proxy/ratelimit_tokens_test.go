package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// normalizeStream blanks what differs between two streams of the same answer
// (the completion's id and creation time).
var streamVolatile = regexp.MustCompile(`"id":"[^"]*"|"created":\d+`)

func normalizeStream(b []byte) string { return streamVolatile.ReplaceAllString(string(b), `"…"`) }

// TestALimitedClientsStreamIsCountedWithoutAskingForUsage: a client with a token
// limit that streams without stream_options.include_usage is still counted —
// the proxy asks the upstream for the usage — and receives the stream exactly
// as the upstream sends it without include_usage: no usage chunk, no
// "usage":null in the other chunks. A client that asked for usage gets it.
func TestALimitedClientsStreamIsCountedWithoutAskingForUsage(t *testing.T) {
	t.Parallel()
	h := newRateLimitHarness(t, "") // metered: 100 tokens a minute; answers use 60
	body := `{"model":"alias","stream":true,"messages":[{"role":"user","content":"q"}],"metadata":{"kept":"as is"}}`
	status, hdr, got := h.post(t, "/v1/chat/completions", body, "Authorization", "Bearer fg-rl-metered")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", status, got)
	}
	sent := h.lastRequest(t)
	if !gjson.GetBytes(sent.Body, "stream_options.include_usage").Bool() || gjson.GetBytes(sent.Body, "metadata.kept").Str != "as is" {
		t.Fatalf("the upstream got %s, want include_usage asked for and the rest kept", sent.Body)
	}

	// What the upstream sends a client that did not ask for usage.
	req, _ := http.NewRequest("POST", h.mock.URL()+"/chat/completions", strings.NewReader(`{"model":"alias","stream":true,"messages":[{"role":"user","content":"q"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(want, []byte(`"usage"`)) {
		t.Fatalf("the reference stream has usage: %s", want)
	}
	if normalizeStream(got) != normalizeStream(want) {
		t.Fatalf("the client's stream differs from the upstream's without include_usage:\n got: %q\nwant: %q", got, want)
	}

	// The 60 tokens were counted.
	status, hdr, _ = ask(t, h, "fg-rl-metered", "alias", false)
	if status != 200 || hdr.Get("x-ratelimit-remaining-tokens") != "40" {
		t.Fatalf("after the stream: %d remaining tokens %q, want 40 (the stream's 60 counted)", status, hdr.Get("x-ratelimit-remaining-tokens"))
	}

	// A client that asked for usage gets the usage chunk, untouched.
	status, _, got = h.post(t, "/v1/chat/completions", `{"model":"alias","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"q"}]}`,
		"Authorization", "Bearer fg-rl-free")
	if status != 200 || !bytes.Contains(got, []byte(`"choices":[],"usage":{`)) || !bytes.Contains(got, []byte(`"usage":null`)) {
		t.Fatalf("a client that asked for usage: %d %s", status, got)
	}
}

// TestConcurrentRequestsReserveTheirTokens: a burst of concurrent requests of a
// client with a token limit does not all pass before the first answer is
// counted: each reserves its estimate when it is admitted — its prompt, and
// max_tokens when it says, else what the client's answers have used beyond
// their prompts so far — settled to what the answer used, so the minute's
// spending stays within the limit plus one answer.
func TestConcurrentRequestsReserveTheirTokens(t *testing.T) {
	t.Parallel()
	burst := func(t *testing.T, h *harness, maxTokens string) int {
		const n = 20
		statuses := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				body := fmt.Sprintf(`{"model":"alias",%s"messages":[{"role":"user","content":"question %d"}]}`, maxTokens, i)
				statuses[i], _, _, _ = h.tryPost("/v1/chat/completions", body, "Authorization", "Bearer fg-rl-metered")
			})
		}
		wg.Wait()
		admitted := 0
		for _, s := range statuses {
			if s == 200 {
				admitted++
			}
		}
		return admitted
	}
	t.Run("with max_tokens", func(t *testing.T) {
		t.Parallel()
		h := newRateLimitHarness(t, "") // metered: 100 tokens a minute; answers use 60
		admitted := burst(t, h, `"max_tokens":50,`)
		if spent := admitted * 60; admitted == 0 || spent > 100+60 {
			t.Fatalf("%d of 20 concurrent requests were admitted: %d tokens spent against a limit of 100", admitted, spent)
		}
		t.Logf("%d of 20 admitted: %d tokens against a limit of 100", admitted, admitted*60)
	})
	t.Run("without max_tokens, after an answer", func(t *testing.T) {
		t.Parallel()
		h := newRateLimitHarness(t, "")
		if status, _, b := ask(t, h, "fg-rl-metered", "alias", false); status != 200 {
			t.Fatalf("the first request: %d %s", status, b)
		}
		admitted := burst(t, h, "")
		if spent := (1 + admitted) * 60; spent > 100+60 {
			t.Fatalf("%d of 20 concurrent requests were admitted after one answer: %d tokens spent against a limit of 100", admitted, spent)
		}
		t.Logf("%d of 20 admitted after one answer: %d tokens against a limit of 100", admitted, (1+admitted)*60)
	})
}

// TestTokenEstimate: the prompt at four bytes a token, the answer's bound the
// request names (max_completion_tokens before max_tokens), else the client's
// running average of what its answers used beyond their prompt.
func TestTokenEstimate(t *testing.T) {
	t.Parallel()
	l := &rateLimiter{}
	for _, tc := range []struct {
		desc, body string
		completion int64
	}{
		{"max_tokens", `{"max_tokens":50,"messages":[]}`, 50},
		{"max_completion_tokens wins", `{"max_tokens":50,"max_completion_tokens":70}`, 70},
		{"a nested max_tokens does not count", `{"metadata":{"max_tokens":9}}`, 0},
		{"a Responses request", `{"max_output_tokens":30,"input":"q"}`, 30},
	} {
		e := l.estimate("c", []byte(tc.body))
		if e.prompt != int64(len(tc.body)+3)/4 || e.completion != tc.completion {
			t.Errorf("%s: %+v, want prompt %d completion %d", tc.desc, e, (len(tc.body)+3)/4, tc.completion)
		}
	}
	l.learn("c", 40)
	l.learn("c", 80)
	if e := l.estimate("c", []byte(`{"messages":[]}`)); e.completion != 50 {
		t.Errorf("after answers of 40 and 80 beyond their prompts: completion %d, want 50", e.completion)
	}
}
