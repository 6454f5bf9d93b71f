package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// longConfig has a read_timeout far shorter than the answers take: it must bound
// reading the request only, never the wait for the answer.
const longConfig = `
server: {read_timeout: 1s, idle_timeout: 1s, keepalive_interval: 200ms}
upstreams:
  mock: {base_url: "%MOCK%"}
  files: {base_url: "%FILES%"}
routes:
  - {name: plain, models: [alias], upstream: mock}
  - {name: held, models: [held], upstream: mock}
  - {name: default, default: true, upstream: files}
`

// slowAnswer takes three read timeouts to start.
const slowAnswer = `default: {content: "a slow answer", latency: 3s}`

// slowDownload serves /v1/files/big/content: 4 MiB trickled over about three read
// timeouts, as a large file download from a provider does.
func slowDownload(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/files/big/content" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		piece := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
		for i := 0; i < 16; i++ {
			if _, err := w.Write(piece); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newLongHarness(t *testing.T, script string) *harness {
	t.Helper()
	files := slowDownload(t)
	return newHarness(t, script, strings.ReplaceAll(longConfig, "%FILES%", files.URL+"/v1"), WithChain("held", holdChain{}))
}

func TestRequestsLongerThanTheReadTimeoutAreAnswered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, method, path, body, route string
		want                            func([]byte) bool
	}{
		{name: "plain route", method: "POST", path: "/v1/chat/completions", route: "plain",
			body: `{"model":"alias","messages":[{"role":"user","content":"q"}]}`,
			want: func(b []byte) bool { return bytes.Contains(b, []byte("a slow answer")) }},
		{name: "held route", method: "POST", path: "/v1/chat/completions", route: "held",
			body: `{"model":"held","messages":[{"role":"user","content":"q"}]}`,
			want: func(b []byte) bool { return bytes.Contains(b, []byte("a slow answer")) }},
		{name: "held stream", method: "POST", path: "/v1/chat/completions", route: "held",
			body: `{"model":"held","stream":true,"messages":[{"role":"user","content":"q"}]}`,
			want: func(b []byte) bool {
				return bytes.HasPrefix(b, []byte(keepAlive)) && bytes.Contains(b, []byte("a slow")) &&
					bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) && !bytes.Contains(b, []byte(`"error"`))
			}},
		{name: "pass-through download", method: "GET", path: "/v1/files/big/content", route: "passthrough",
			want: func(b []byte) bool { return len(b) == 4<<20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newLongHarness(t, slowAnswer)
			req, err := http.NewRequest(tc.method, h.base+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("reading the answer after %v: %v (got %d bytes)", time.Since(start), err, len(b))
			}
			if resp.StatusCode != 200 || !tc.want(b) {
				t.Fatalf("after %v: %d, %d bytes: %.300s", time.Since(start), resp.StatusCode, len(b), b)
			}
			if elapsed := time.Since(start); elapsed < 2*time.Second {
				t.Fatalf("the answer took %v: it did not outlast the read timeout, the test proves nothing", elapsed)
			}
			waitForLog(t, h, `"route":"`+tc.route+`"`)
			for _, line := range strings.Split(h.logs.String(), "\n") {
				if strings.Contains(line, `"msg":"request"`) && !strings.Contains(line, `"status":200`) {
					t.Fatalf("access log: %s", line)
				}
			}
			if m := metricsText(t, h); strings.Contains(m, `code="499"`) || !strings.Contains(m, `factgate_requests_total{code="200",route="`+tc.route+`"} 1`) {
				t.Fatalf("metrics:\n%s", grepLines(m, "factgate_requests_total"))
			}
		})
	}
}

func TestAClientThatLeavesALongRequestIsStillDetected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body string }{
		{"plain route", `{"model":"alias","messages":[{"role":"user","content":"q"}]}`},
		{"held route", `{"model":"held","messages":[{"role":"user","content":"q"}]}`},
		{"held stream", `{"model":"held","stream":true,"messages":[{"role":"user","content":"q"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newLongHarness(t, `default: {content: "never read", latency: 30s}`)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", h.base+"/v1/chat/completions", strings.NewReader(tc.body))
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				errc <- err
			}()
			if err := h.mock.WaitForStarted(1, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			// Outlast the read timeout, then leave.
			time.Sleep(1500 * time.Millisecond)
			left := time.Now()
			cancel()
			if err := <-errc; err == nil {
				t.Fatal("the request was answered")
			}
			recs, err := h.mock.WaitFor(1, 10*time.Second)
			if err != nil {
				t.Fatalf("the upstream call was not cancelled: %v", err)
			}
			if !recs[0].Cancelled {
				t.Fatalf("the upstream call was not cancelled: %+v", recs[0])
			}
			took := recs[0].Finished.Sub(left)
			t.Logf("the upstream call ended %v after the client left", took)
			if took > 3*time.Second {
				t.Fatalf("the upstream call ended %v after the client left", took)
			}
			waitForLog(t, h, `"status":499`)
		})
	}
}

// TestAHeldStreamReadToDoneIsNeverCountedAsGone: a client that reads the answer
// to [DONE] and hangs up right away got its whole answer.
func TestAHeldStreamReadToDoneIsNeverCountedAsGone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `default: {content: "held answer", latency: 80ms}`, `
server: {keepalive_interval: 10ms}
upstreams:
  mock: {base_url: "%MOCK%"}
routes:
  - {name: held, models: [held], upstream: mock}
  - {name: default, default: true, upstream: mock}
`, WithChain("held", holdChain{}))
	const n = 40
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		body := `{"model":"held","stream":true,"messages":[{"role":"user","content":"q"}]}`
		_, err = io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		held, data := false, false
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			// A keep-alive is a blank line before the first event.
			held = held || (line == keepAlive && !data)
			data = data || strings.HasPrefix(line, "data:")
			if strings.HasPrefix(line, "data: [DONE]") {
				break
			}
		}
		c.Close()
		if !held {
			t.Fatalf("request %d was not held (no keep-alive): the test proves nothing", i)
		}
	}
	want := `factgate_requests_total{code="200",route="held"} ` + strconv.Itoa(n)
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := metricsText(t, h)
		if strings.Contains(m, `code="499"`) {
			t.Fatalf("a stream read to [DONE] was counted as 499:\n%s", grepLines(m, "factgate_requests_total"))
		}
		if strings.Contains(m, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %s:\n%s", want, grepLines(m, "factgate_requests_total"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(h.logs.String(), `"status":499`) {
		t.Fatalf("a stream read to [DONE] was logged as 499")
	}
}

// TestReadAndIdleTimeoutsStillBoundConnections: a request that outlasted the read
// timeout does not lift it for the connection: an idle keep-alive connection is
// closed after idle_timeout, and a request sent too slowly gets 408.
func TestReadAndIdleTimeoutsStillBoundConnections(t *testing.T) {
	t.Parallel()
	h := newLongHarness(t, slowAnswer)
	addr := strings.TrimPrefix(h.base, "http://")
	body := `{"model":"alias","messages":[{"role":"user","content":"q"}]}`
	request := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"

	t.Run("idle after a long request", func(t *testing.T) {
		t.Parallel()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, request+body); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		idle := time.Now()
		if _, err := r.ReadByte(); err == nil {
			t.Fatal("the server sent bytes on an idle connection")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the idle connection stayed open for %v (idle_timeout 1s)", time.Since(idle))
		}
		t.Logf("idle connection closed after %v", time.Since(idle))
	})
	for _, tc := range []struct{ name, sent string }{
		{"slow headers", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"},
		{"slow body", request + body[:10]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.sent); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("after %v: %v", time.Since(start), err)
			}
			if resp.StatusCode != 408 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			t.Logf("408 after %v (read_timeout 1s)", time.Since(start))
		})
	}
}

func waitForLog(t *testing.T, h *harness, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(h.logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s logged:\n%s", want, h.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func metricsText(t *testing.T, h *harness) string {
	t.Helper()
	resp, err := http.Get(h.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, substr string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
