package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/cache"
)

// getTrace fetches a trace with the given Authorization ("" sends none) once,
// without waiting for it.
func getTrace(t testing.TB, base, id, auth string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/factgate/v1/traces/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// storedTrace polls a trace as auth until it is stored and returns it: a trace
// is stored before its answer completes (TestATraceIsReadableWhenItsAnswerIsComplete);
// polling covers a machine so loaded that the store took longer than the answer
// waits for it. After 5s it fails t.
func storedTrace(t testing.TB, base, id, auth string) []byte {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, b := getTrace(t, base, id, auth)
		if status == 200 {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s, as %q: %d %s", id, auth, status, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// heldRequest makes one request on the held route and returns its trace id.
func heldRequest(t testing.TB, h *harness, auth string) string {
	t.Helper()
	var hdr []string
	if auth != "" {
		hdr = []string{"Authorization", auth}
	}
	status, header, body := h.post(t, "/v1/chat/completions", `{"model":"held","messages":[{"role":"user","content":"my private replay"}]}`, hdr...)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	id := header.Get("X-Factgate-Trace-Id")
	if id == "" {
		t.Fatal("no trace id")
	}
	return id
}

// notFound asserts the answer for a trace the reader may not see is exactly the
// answer for a trace that does not exist: nothing tells the two apart.
func notFound(t testing.TB, base, id, auth string) {
	t.Helper()
	status, got := getTrace(t, base, id, auth)
	const missing = "0123456789abcdef0123456789abcdef"
	wantStatus, want := getTrace(t, base, missing, auth)
	if status != 404 || wantStatus != 404 || !bytes.Equal(got, bytes.ReplaceAll(want, []byte(missing), []byte(id))) {
		t.Fatalf("another reader got %d %s; a missing trace gets %d %s", status, got, wantStatus, want)
	}
}

const ownerKeysConfig = `
auth:
  mode: keys
  keys:
    - {name: app, key_env: FACTGATE_KEY_TRACE_OWNER_APP}
    - {name: other, key_env: FACTGATE_KEY_TRACE_OWNER_OTHER}
    - {name: ops, key_env: FACTGATE_KEY_TRACE_OWNER_OPS, admin: true}
upstreams:
  mock: {base_url: "%MOCK%"}
routes:
  - {name: held, models: [held], upstream: mock}
`

func init() {
	// Unique names: tests setting them run in parallel with others.
	os.Setenv("FACTGATE_KEY_TRACE_OWNER_APP", "fg-trace-app")
	os.Setenv("FACTGATE_KEY_TRACE_OWNER_OTHER", "fg-trace-other")
	os.Setenv("FACTGATE_KEY_TRACE_OWNER_OPS", "fg-trace-ops")
}

// With proxy-issued keys a trace belongs to the key that made the request: another
// key gets the 404 of a missing trace, an admin key reads it.
func TestTracesBelongToTheirClientKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", ownerKeysConfig, WithChain("held", holdChain{}))
	id := heldRequest(t, h, "Bearer fg-trace-app")
	tr := storedTrace(t, h.base, id, "Bearer fg-trace-app")
	if o := gjson.GetBytes(tr, "owner").Str; o != "key:app" {
		t.Fatalf("owner %q, want key:app", o)
	}
	t.Run("another key", func(t *testing.T) {
		t.Parallel()
		notFound(t, h.base, id, "Bearer fg-trace-other")
	})
	t.Run("an admin key", func(t *testing.T) {
		t.Parallel()
		status, b := getTrace(t, h.base, id, "Bearer fg-trace-ops")
		if status != 200 || !bytes.Equal(b, tr) {
			t.Fatalf("admin: %d %s", status, b)
		}
	})
	t.Run("no key", func(t *testing.T) {
		t.Parallel()
		if status, b := getTrace(t, h.base, id, ""); status != 401 || gjson.GetBytes(b, "error.code").Str != "missing_api_key" {
			t.Fatalf("no key: %d %s", status, b)
		}
	})
}

// In passthrough mode the proxy issues no keys: a trace belongs to the credential
// its request carried, and a request without one leaves a trace nobody reads.
func TestPassthroughTracesBelongToTheCredential(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", clientConfig, WithChain("held", holdChain{}))
	alice := heldRequest(t, h, "Bearer sk-alice-provider-key")
	tr := storedTrace(t, h.base, alice, "Bearer sk-alice-provider-key")
	if o := gjson.GetBytes(tr, "owner").Str; !strings.HasPrefix(o, "credential:") || strings.Contains(string(tr), "sk-alice") {
		t.Fatalf("owner %q; the trace must name a hash, never the credential: %s", o, tr)
	}
	anonymous := heldRequest(t, h, "")
	// The trace of the anonymous request is stored (an admin could read it; here
	// nobody can): wait for the owner's before probing it, so that a 404 is not
	// just "not yet stored".
	storedTrace(t, h.base, heldRequest(t, h, "Bearer sk-bob-provider-key"), "Bearer sk-bob-provider-key")

	cases := []struct {
		name   string
		id     string
		auth   string
		status int
	}{
		{"another credential", alice, "Bearer sk-bob-provider-key", 404},
		{"the same key in another scheme", alice, "sk-alice-provider-key", 404},
		{"no credential", alice, "", 401},
		{"an anonymous request's trace, with a credential", anonymous, "Bearer sk-alice-provider-key", 404},
		{"an anonymous request's trace, without one", anonymous, "", 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.status == 404 {
				notFound(t, h.base, tc.id, tc.auth)
				return
			}
			if status, b := getTrace(t, h.base, tc.id, tc.auth); status != tc.status || gjson.GetBytes(b, "error.code").Str != "missing_api_key" {
				t.Fatalf("%d %s, want %d missing_api_key", status, b, tc.status)
			}
		})
	}
}

// A passthrough replica sharing the trace store of a replica with keys serves
// none of its traces, whatever credential it is sent.
func TestAPassthroughReplicaServesNoKeyedTrace(t *testing.T) {
	t.Parallel()
	shared, err := cache.New(cache.Config{}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.Close() })
	keyed := newHarness(t, "", ownerKeysConfig, WithChain("held", holdChain{}), WithCache(shared))
	open := newHarness(t, "", clientConfig, WithChain("held", holdChain{}), WithCache(shared))
	id := heldRequest(t, keyed, "Bearer fg-trace-app")
	storedTrace(t, keyed.base, id, "Bearer fg-trace-app")
	for _, auth := range []string{"Bearer fg-trace-app", "Bearer fg-trace-ops", "Bearer anything"} {
		notFound(t, open.base, id, auth)
	}
	if status, _ := getTrace(t, open.base, id, ""); status != 401 {
		t.Fatalf("no credential: %d", status)
	}
}

// server.metrics_listen moves /metrics off the main listener.
func TestMetricsListen(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", `
server: {metrics_listen: "127.0.0.1:0"}
upstreams:
  mock: {base_url: "%MOCK%"}
routes:
  - {name: held, models: [held], upstream: mock}
  - {name: default, default: true, upstream: mock}
`, WithChain("held", holdChain{}))
	heldRequest(t, h, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = h.srv.ServeMetrics(ln) }()
	metrics := "http://" + ln.Addr().String()
	for _, c := range []struct {
		name, url string
		status    int
		has       string
	}{
		{"the metrics address serves /metrics", metrics + "/metrics", 200, `factgate_requests_total{code="200",route="held"} 1`},
		{"and nothing else", metrics + "/v1/models", 404, "serves /metrics only"},
		{"the main listener does not", h.base + "/metrics", 404, "server.metrics_listen"},
	} {
		resp, err := http.Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.has) {
			t.Errorf("%s: %d %.300s, want %d with %q", c.name, resp.StatusCode, b, c.status, c.has)
		}
	}
	if len(h.mock.Requests()) != 1 {
		t.Fatal("/metrics on the main listener was forwarded upstream")
	}
}

// ListenAndServe opens both listeners and closes both on shutdown.
func TestListenAndServeOpensTheMetricsListener(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte(`
server: {listen: "127.0.0.1:0", metrics_listen: "127.0.0.1:0"}
upstreams:
  mock: {base_url: "http://127.0.0.1:9/v1"}
routes:
  - {name: default, default: true, upstream: mock}
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{w: &bytes.Buffer{}}
	srv, err := New(cfg, WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx) }()
	// The addresses the system picked are in the start-up log.
	var main, metrics string
	deadline := time.Now().Add(10 * time.Second)
	for main == "" || metrics == "" {
		for _, line := range strings.Split(logs.String(), "\n") {
			if a := gjson.Get(line, "listen").Str; a != "" {
				main = a
			}
			if a := gjson.Get(line, "metrics_listen").Str; a != "" {
				metrics = a
			}
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no listen addresses logged: %s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	get := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if m, h := get("http://"+metrics+"/metrics"), get("http://"+main+"/metrics"); m != 200 || h != 404 {
		cancel()
		t.Fatalf("/metrics: %d on metrics_listen, %d on listen; want 200 and 404", m, h)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ListenAndServe did not return after its context ended")
	}
	if c, err := net.DialTimeout("tcp", metrics, time.Second); err == nil {
		c.Close()
		t.Fatal("the metrics listener is still open after shutdown")
	}
}
