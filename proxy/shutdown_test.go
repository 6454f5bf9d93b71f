package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestShutdownAnswersReadyzDrainingDuringTheGrace: a load balancer must see the
// replica leave before its listener closes; in-flight requests still finish.
func TestShutdownAnswersReadyzDrainingDuringTheGrace(t *testing.T) {
	t.Parallel()
	// The grace is far longer than the checks below take; the test waits it out
	// once, at the end.
	h := newHarness(t, `
rules:
  - match: {last_user: "^slow"}
    answer: {content: "finished", latency: 500ms}
default: {content: "ok"}
`, `
server: {drain_grace: 3s}
upstreams:
  mock: {base_url: "%MOCK%"}
routes:
  - {name: default, default: true, upstream: mock}
`)
	// Every probe opens a new connection: the listener itself must answer.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, http.Header, string) {
		t.Helper()
		resp, err := fresh.Get(h.base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	if status, _, body := get("/readyz"); status != 200 {
		t.Fatalf("before shutdown: /readyz %d %s", status, body)
	}

	inFlight := make(chan int, 1)
	go func() {
		resp, err := fresh.Post(h.base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"slow"}]}`))
		if err != nil {
			inFlight <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		inFlight <- resp.StatusCode
	}()
	if err := h.mock.WaitForStarted(1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shutdown <- h.srv.Shutdown(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, body := get("/readyz")
		if status == 503 && gjson.Get(body, "status").Str == "draining" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never said draining: %d %s", status, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A client that would keep the connection: the answer closes it, so that the
	// client's retry goes to a new connection (another replica).
	keepAlive := &http.Client{Transport: &http.Transport{}}
	resp, err := keepAlive.Post(h.base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"q"}]}`))
	if err != nil {
		t.Fatalf("a new request during the grace: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || gjson.GetBytes(b, "error.code").Str != "shutting_down" || !resp.Close {
		t.Fatalf("a new request during the grace: %d (connection close %v) %s", resp.StatusCode, resp.Close, b)
	}
	if status, _, body := get("/healthz"); status != 200 {
		t.Fatalf("/healthz during the grace: %d %s", status, body)
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned during the checks (%v): the grace did not hold the listener open", err)
	default:
	}
	if got := <-inFlight; got != 200 {
		t.Fatalf("the in-flight request ended with %d", got)
	}
	select {
	case err := <-shutdown:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(h.base, "http://"), 2*time.Second); err == nil {
		c.Close()
		t.Fatal("the listener still accepts after Shutdown")
	}
	if !strings.Contains(h.logs.String(), `"error":"shutting_down"`) {
		t.Fatalf("the refused request is not in the access log:\n%s", h.logs.String())
	}
}
