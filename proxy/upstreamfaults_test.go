package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// rawUpstream is an upstream played by hand on a TCP listener, for faults an HTTP
// server library will not make: serve gets each accepted connection.
func rawUpstream(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/v1"
}

// reset closes c with a TCP reset instead of an orderly close.
func reset(c net.Conn) {
	_ = c.(*net.TCPConn).SetLinger(0)
	_ = c.Close()
}

// rawConfig routes "alias" and every other path to the raw upstream %RAW%.
const rawConfig = `
upstreams:
  raw: {base_url: "%RAW%", read_timeout: 10s}
routes:
  - {name: plain, models: [alias], upstream: raw}
  - {name: default, default: true, upstream: raw}
`

func newRawHarness(t *testing.T, serve func(c net.Conn)) *harness {
	t.Helper()
	return newHarness(t, "", strings.ReplaceAll(rawConfig, "%RAW%", rawUpstream(t, serve)))
}

func TestAStreamedAnswerTheUpstreamBreaksOffIsLoggedAsAFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, method, path, body, contentType, route string
		cut                                          func(net.Conn)
	}{
		{name: "download reset", method: "GET", path: "/v1/files/f/content", contentType: "application/octet-stream", route: "passthrough", cut: reset},
		{name: "download closed", method: "GET", path: "/v1/files/f/content", contentType: "application/octet-stream", route: "passthrough", cut: func(c net.Conn) { c.Close() }},
		{name: "chat stream reset", method: "POST", path: "/v1/chat/completions", contentType: "text/event-stream", route: "plain", cut: reset,
			body: `{"model":"alias","stream":true,"messages":[{"role":"user","content":"q"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newRawHarness(t, func(c net.Conn) {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: "+tc.contentType+"\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n")
				tc.cut(c)
			})
			req, _ := http.NewRequest(tc.method, h.base+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || err == nil {
				t.Fatalf("want 200 headers and a broken body, got %d, %v: %q", resp.StatusCode, err, b)
			}
			waitForLog(t, h, `"route":"`+tc.route+`"`)
			var line string
			for _, l := range strings.Split(h.logs.String(), "\n") {
				if strings.Contains(l, `"msg":"request"`) && strings.Contains(l, `"route":"`+tc.route+`"`) {
					line = l
				}
			}
			if gjson.Get(line, "status").Int() != 502 || gjson.Get(line, "error").Str != "upstream_stream_broken" {
				t.Fatalf("access log: %s", line)
			}
			m := metricsText(t, h)
			if !strings.Contains(m, `factgate_requests_total{code="502",route="`+tc.route+`"} 1`) ||
				!strings.Contains(m, `factgate_requests_total{code="200",route="`+tc.route+`"} 0`) {
				t.Fatalf("metrics:\n%s", grepLines(m, "factgate_requests_total"))
			}
		})
	}
}

// chatOK is a complete chat answer with keep-alive framing.
const chatOK = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 71\r\n\r\n" +
	`{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}]}`

// serveRequests reads requests from c until it closes and hands each body to
// answer, which writes the response and says whether to keep serving.
func serveRequests(c net.Conn, answer func(body string) bool) {
	r := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		if !answer(string(b)) {
			return
		}
	}
}

// paidConfig is rawConfig with retries on and a fallback upstream, %SPARE%: a
// request the first upstream may have billed goes to neither.
const paidConfig = `
upstreams:
  raw: {base_url: "%RAW%", read_timeout: 10s, retry: {max_retries: 3, base_delay: 1ms}}
  spare: {base_url: "%SPARE%", read_timeout: 10s}
routes:
  - {name: plain, models: [alias], upstreams: [raw, spare]}
  - {name: default, default: true, upstream: raw}
`

// TestAPaidRequestIsNeverSentTwice: an upstream that read a whole request on a
// reused connection and then reset it may have billed it; the proxy must not
// send it again — not on a fresh connection, not as a retry, not to the route's
// fallback upstream.
func TestAPaidRequestIsNeverSentTwice(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var paid, conns, spare int
	spareURL := rawUpstream(t, func(c net.Conn) {
		serveRequests(c, func(string) bool {
			mu.Lock()
			spare++
			mu.Unlock()
			_, err := io.WriteString(c, chatOK)
			return err == nil
		})
	})
	raw := rawUpstream(t, func(c net.Conn) {
		mu.Lock()
		conns++
		mu.Unlock()
		serveRequests(c, func(body string) bool {
			if strings.Contains(body, "paid") {
				mu.Lock()
				paid++
				mu.Unlock()
				reset(c)
				return false
			}
			_, err := io.WriteString(c, chatOK)
			return err == nil
		})
	})
	h := newHarness(t, "", strings.NewReplacer("%RAW%", raw, "%SPARE%", spareURL).Replace(paidConfig))
	for _, tc := range []struct {
		content string
		status  int
		code    string
	}{
		{"warm", 200, ""}, // leaves a pooled connection
		{"paid", 502, "upstream_failed"},
	} {
		status, _, body := h.post(t, "/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"`+tc.content+`"}]}`)
		if status != tc.status || gjson.GetBytes(body, "error.code").Str != tc.code {
			t.Fatalf("%s: %d %s", tc.content, status, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if paid != 1 {
		t.Fatalf("the upstream read the paid request %d times, want once", paid)
	}
	if conns != 1 {
		t.Fatalf("the proxy opened %d connections, want 1 (the paid request went on the pooled one)", conns)
	}
	if spare != 0 {
		t.Fatalf("the fallback upstream got %d requests, want none", spare)
	}
}

// TestAPooledConnectionClosedWhileIdleIsReplaced: an upstream that closes a
// keep-alive connection while it sits in the pool costs the client nothing.
func TestAPooledConnectionClosedWhileIdleIsReplaced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		close func(net.Conn)
	}{
		{"closed", func(c net.Conn) { c.Close() }},
		{"reset", reset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var requests, conns int
			idleClosed := make(chan struct{}, 4)
			h := newRawHarness(t, func(c net.Conn) {
				mu.Lock()
				conns++
				mu.Unlock()
				serveRequests(c, func(string) bool {
					mu.Lock()
					requests++
					mu.Unlock()
					if _, err := io.WriteString(c, chatOK); err != nil {
						return false
					}
					// The answer said keep-alive; the connection goes away while idle.
					tc.close(c)
					idleClosed <- struct{}{}
					return false
				})
			})
			for i := 0; i < 3; i++ {
				status, _, body := h.post(t, "/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"q"}]}`)
				if status != 200 {
					t.Fatalf("request %d: %d %s", i, status, body)
				}
				select {
				case <-idleClosed:
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream did not close its connection")
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if requests != 3 || conns != 3 {
				t.Fatalf("the upstream saw %d requests on %d connections, want 3 on 3", requests, conns)
			}
		})
	}
}
