package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestExpectContinueOverTheLimitGets413First: a client that asks whether it may
// send a body (Expect: 100-continue) whose Content-Length is already over the
// limit gets the 413 at once — no 100 Continue that would invite it to send a
// body the proxy is going to refuse.
func TestExpectContinueOverTheLimitGets413First(t *testing.T) {
	t.Parallel()
	// max_request_body 64KiB, the check's own bound below it.
	h := newHarness(t, "", strings.Replace(baseConfig, "server:\n", "server:\n  max_check_body: 16KiB\n", 1))
	for _, tc := range []struct{ desc, path, limitKey string }{
		{"a chat completion", "/v1/chat/completions", "server.max_request_body"},
		{"a pass-through path", "/v1/embeddings", "server.max_request_body"},
		{"the check endpoint", "/factgate/v1/check", "server.max_check_body"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
				tc.path, harnessCredential, 100<<20)
			r := bufio.NewReader(c)
			line, err := textproto.NewReader(r).ReadLine()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(line, "HTTP/1.1 413") {
				t.Fatalf("first answer %q, want the 413 before any 100 Continue", line)
			}
			resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(strings.NewReader(line+"\r\n"), r)), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if gjson.GetBytes(b, "error.code").Str != "request_too_large" || !strings.Contains(gjson.GetBytes(b, "error.message").Str, tc.limitKey) {
				t.Fatalf("413 body %s, want request_too_large naming %s", b, tc.limitKey)
			}
		})
	}
	// Under the limit the client is invited as before.
	c, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	body := `{"model":"alias","messages":[{"role":"user","content":"q"}]}`
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", harnessCredential, len(body))
	r := bufio.NewReader(c)
	line, err := textproto.NewReader(r).ReadLine()
	if err != nil || line != "HTTP/1.1 100 Continue" {
		t.Fatalf("under the limit: %q %v, want 100 Continue", line, err)
	}
}

// TestReadErrorsAndTheFactgateAPIAreInTheAccessLog: a request the server could
// not read (408, 413) and every factgate API call (a trace read, a check) leave
// an access log line saying who, what and the status.
func TestReadErrorsAndTheFactgateAPIAreInTheAccessLog(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", strings.Replace(baseConfig, "server:\n", "server:\n  read_timeout: 300ms\n", 1))
	addr := strings.TrimPrefix(h.base, "http://")

	// 408: the headers never end.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.Close()
	if resp.StatusCode != 408 {
		t.Fatalf("slow headers: %d, want 408", resp.StatusCode)
	}

	// A trace read (404: no such trace) and a check (400: bad input).
	req, _ := http.NewRequest("GET", h.base+"/factgate/v1/traces/nope", nil)
	req.Header.Set("Authorization", harnessCredential)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	h.post(t, "/factgate/v1/check", `{"facts": "x"}`)

	want := []struct {
		path   string
		status int
		code   string
	}{
		{"", 408, "request_timeout"}, // fasthttp has reset the request it could not read
		{"/factgate/v1/traces/nope", 404, "trace_not_found"},
		{"/factgate/v1/check", 400, "missing_answer"},
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, w := range want {
		for {
			found := false
			for line := range strings.Lines(h.logs.String()) {
				l := gjson.Parse(line)
				if l.Get("msg").Str == "request" && l.Get("path").Str == w.path && int(l.Get("status").Int()) == w.status &&
					l.Get("error").Str == w.code && l.Get("remote").Str == "127.0.0.1" && (w.path == "" || l.Get("method").Exists()) {
					found = true
				}
			}
			if found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no access log line for %s %d %s with method and remote address:\n%s", w.path, w.status, w.code, grepLines(h.logs.String(), `"request"`))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestCheckCountsAgainstTheRateLimitAndHasItsOwnBound: POST /factgate/v1/check
// is a request like any other for the client's requests per minute, and a body
// over server.max_check_body (default 4 MiB) is refused before it is parsed.
func TestCheckCountsAgainstTheRateLimitAndHasItsOwnBound(t *testing.T) {
	t.Parallel()
	h := newRateLimitHarness(t, "") // app: 4 requests a minute
	check := func(body string) (int, http.Header, []byte) {
		return h.post(t, "/factgate/v1/check", body, "Authorization", "Bearer fg-rl-app")
	}
	big := checkBody(t, map[string]any{"facts": strings.Repeat("0:05.20 PlayerA 出售 [UnitId]246\n", (5<<20)/40), "answer": "x"})
	status, _, body := check(big)
	if status != 413 || gjson.GetBytes(body, "error.code").Str != "request_too_large" ||
		!strings.Contains(gjson.GetBytes(body, "error.message").Str, "server.max_check_body") {
		t.Fatalf("a 5 MiB check: %d %s, want 413 naming server.max_check_body", status, body)
	}
	for i := 2; i <= 4; i++ {
		status, hdr, body := check(`{"facts": "x", "answer": "没有声明。", "require_claims": false}`)
		if status != 200 {
			t.Fatalf("check %d: %d %s", i, status, body)
		}
		if got := hdr.Get("x-ratelimit-remaining-requests"); got != fmt.Sprint(4-i) {
			t.Errorf("check %d: x-ratelimit-remaining-requests %q, want %d", i, got, 4-i)
		}
	}
	status, hdr, body := check(`{"facts": "x", "answer": "没有声明。", "require_claims": false}`)
	if status != 429 || gjson.GetBytes(body, "error.code").Str != "rate_limit_exceeded" || hdr.Get("Retry-After") == "" {
		t.Fatalf("the fifth check in the minute: %d %s, want 429 rate_limit_exceeded with Retry-After", status, body)
	}
	// The same window limits chat completions.
	if status, _, body := ask(t, h, "fg-rl-app", "alias", false); status != 429 {
		t.Fatalf("a chat completion after four checks: %d %s, want 429", status, body)
	}
}
