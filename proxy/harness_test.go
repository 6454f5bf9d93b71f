package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factgate/factgate/proxy/mockupstream"
)

// harness runs the mock upstream and a proxy in front of it on loopback.
//
// Its methods take the test they report to: a harness built by a parent test is
// often used by its subtests, and a subtest must never FailNow its parent.
type harness struct {
	mock *mockupstream.Server
	srv  *Server
	base string // http://127.0.0.1:PORT
	logs *syncWriter
}

// baseConfig routes model "alias" to the mock's "mock-upstream-model" and everything
// else (default route) to the mock unchanged. %MOCK% is the mock's URL.
const baseConfig = `
server:
  keepalive_interval: 200ms
  max_request_body: 64KiB
log:
  level: debug
upstreams:
  mock:
    base_url: "%MOCK%"
    read_timeout: 5s
routes:
  - name: aliased
    models: [alias]
    upstream: mock
    upstream_model: mock-upstream-model
  - name: default
    default: true
    upstream: mock
`

func newHarness(t *testing.T, script, config string, opts ...Option) *harness {
	t.Helper()
	var sc *mockupstream.Script
	if script != "" {
		var err error
		sc, err = mockupstream.ParseScript([]byte(script), t.Name())
		if err != nil {
			t.Fatalf("script: %v", err)
		}
	}
	mock := mockupstream.New(mockupstream.Options{Script: sc, Record: true})
	if err := mock.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	if config == "" {
		config = baseConfig
	}
	// %MOCKROOT% is the mock's origin, without the API's base path.
	config = strings.ReplaceAll(config, "%MOCKROOT%", strings.TrimSuffix(mock.URL(), "/v1"))
	cfg, err := ParseConfig([]byte(strings.ReplaceAll(config, "%MOCK%", mock.URL())), "test.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if !strings.Contains(config, "drain_grace") {
		// No load balancer watches a test's proxy: shut down without the grace.
		cfg.Server.DrainGrace = nil
	}
	logs := &syncWriter{w: &bytes.Buffer{}}
	opts = append([]Option{WithLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))}, opts...)
	srv, err := New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return &harness{mock: mock, srv: srv, base: "http://" + ln.Addr().String(), logs: logs}
}

// post sends a JSON body and returns the status, headers and body; a transport
// failure fails t. In a goroutine use tryPost: t.Fatal must not run there.
func (h *harness) post(t testing.TB, path string, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	status, hdr, b, err := h.tryPost(path, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	return status, hdr, b
}

// harnessCredential is the Authorization a harness client sends unless a test
// names its own: in passthrough mode a trace belongs to the credential of its
// request, and the harness reads traces with it (trace). The go-openai and openai-go clients of the tests send the same key.
const harnessCredential = "Bearer client-key"

// tryPost is post that returns a transport failure instead of failing a test.
func (h *harness) tryPost(path string, body string, header ...string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest("POST", h.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", harnessCredential)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return resp.StatusCode, resp.Header, b, nil
}

// lastRequest returns the last request the mock recorded.
func (h *harness) lastRequest(t testing.TB) mockupstream.Recorded {
	t.Helper()
	recs := h.mock.Requests()
	if len(recs) == 0 {
		t.Fatal("the mock upstream recorded no request")
	}
	return recs[len(recs)-1]
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
