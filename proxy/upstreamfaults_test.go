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

// waitUntil polls cond until it holds or ten seconds pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
