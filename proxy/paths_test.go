package proxy

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func init() {
	os.Setenv("FACTGATE_PATHS_UPSTREAM_KEY", "sk-provider-secret")
	os.Setenv("FACTGATE_PATHS_CLIENT", "fg-paths-client")
}

// targetRecorder is a provider that records the request-target of every request
// exactly as it arrived (no decoding, no cleaning) and the key it carried.
type targetRecorder struct {
	mu      sync.Mutex
	targets []string
	keys    []string
	url     string
}

func startTargetRecorder(t *testing.T, basePath string) *targetRecorder {
	t.Helper()
	u := &targetRecorder{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.targets = append(u.targets, r.RequestURI)
		u.keys = append(u.keys, r.Header.Get("Authorization"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{\"object\": \"list\", \"data\": []}\n")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	u.url = "http://" + ln.Addr().String() + basePath
	return u
}

func (u *targetRecorder) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.targets...)
}

// rawRequest sends one request with the request-target exactly as given (no
// client library cleans it) and returns the status line's code and the body.
func rawRequest(t *testing.T, addr, method, target, auth string) (int, []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", method, target, addr, auth)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

const pathsConfig = `
auth:
  mode: keys
  keys:
    - {name: app, key_env: FACTGATE_PATHS_CLIENT}
upstreams:
  provider: {base_url: "%UP%", api_key_env: FACTGATE_PATHS_UPSTREAM_KEY}
routes:
  - {name: default, default: true, upstream: provider}
`

// TestProxiedPathStaysUnderTheUpstreamBase: in keys mode the proxy sends the
// provider's key with every forwarded request, so a client key must reach no
// path of the provider's host outside its API base. Every form an attacker tries
// — dot segments, their percent-encodings, encoded slashes and backslashes,
// double slashes, a path outside /v1 — is a 404 in the OpenAI envelope before
// any upstream call; a path that stays under the base is forwarded cleaned and
// escaped, so the upstream cannot decode it into something else.
func TestProxiedPathStaysUnderTheUpstreamBase(t *testing.T) {
	t.Parallel()
	up := startTargetRecorder(t, "/api/v1")
	cfg, err := ParseConfig([]byte(strings.ReplaceAll(pathsConfig, "%UP%", up.url)), "paths.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DrainGrace = nil
	srv, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()) })
	addr := ln.Addr().String()
	const auth = "Bearer fg-paths-client"

	refused := []string{
		"/v1/../../x",
		"/v1/../../../admin",
		"/v1/%2e%2e/%2e%2e/x",
		"/v1/%2E%2E/%2E%2E/x",
		"/v1/..%2f..%2fx",
		"/v1/..%2F..%2Fadmin",
		"/v1%2f..%2f..%2fx",
		"/v1/.%2e/.%2e/x",
		"/v1//..//..//x",
		"/v1/a/../../../x",
		`/v1\..\..\x`,
		"/v1/%5c..%5c..%5cx",
		"/v1/models/..%5c..%5c..%5cx",
		"/v1;/../../x",
		"/x",
		"/admin/keys",
		"/api/x",
		"//evil.example/x",
		"/v1/..",
		"/v1/%2e%2e",
		"/v1/./../x",
		"/v2/models",
	}
	for _, target := range refused {
		status, body := rawRequest(t, addr, "GET", target, auth)
		if status != 404 || gjson.GetBytes(body, "error.code").Str != "not_found" || gjson.GetBytes(body, "error.type").Str != "invalid_request_error" {
			t.Errorf("GET %s: %d %s, want 404 not_found in the OpenAI envelope", target, status, body)
		}
	}
	if seen := up.seen(); len(seen) > 0 {
		t.Fatalf("the provider got %d requests outside its base path with its key: %q", len(seen), seen)
	}

	// Paths that stay under the base: cleaned and escaped on the way.
	forwarded := []struct{ target, want string }{
		{"/v1/embeddings", "/api/v1/embeddings"},
		{"/v1/./files", "/api/v1/files"},
		{"/v1/files/a/../b", "/api/v1/files/b"},
		{"/v1//files", "/api/v1/files"},
		{"/v1/files/%252e%252e/x", "/api/v1/files/%252e%252e/x"},
		{"/v1/files/a%0d%0aX-Injected:%20y", "/api/v1/files/a%0D%0AX-Injected:%20y"},
		{"/v1/files/a%3fb=c?limit=2", "/api/v1/files/a%3Fb=c?limit=2"},
		{"/v1/files/x%23y", "/api/v1/files/x%23y"},
	}
	for _, f := range forwarded {
		status, body := rawRequest(t, addr, "GET", f.target, auth)
		if status != 200 {
			t.Errorf("GET %s: %d %s, want it forwarded", f.target, status, body)
			continue
		}
		seen := up.seen()
		if got := seen[len(seen)-1]; got != f.want {
			t.Errorf("GET %s reached the provider as %q, want %q", f.target, got, f.want)
		}
	}
}

// TestCleanPathAndReaches: the cleaning and the base check for bases with and
// without a path.
func TestCleanPathAndReaches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, path, clean string
		base              string
		reaches           bool
	}{
		{"plain", "/v1/chat/completions", "/v1/chat/completions", "/v1", true},
		{"dot segments", "/v1/a/./b/../c", "/v1/a/c", "/v1", true},
		{"backslashes", `/v1\..\x`, "/x", "/v1", false},
		{"escaping", "/v1/a b?c#d%e", "/v1/a%20b%3Fc%23d%25e", "/v1", true},
		{"trailing slash kept", "/v1/files/", "/v1/files/", "/v1", true},
		{"root", "/", "/", "/v1", false},
		{"outside /v1, base without a path", "/x/y", "/x/y", "", true},
		{"outside /v1, under the base", "/openai/v1/models", "/openai/v1/models", "/openai/v1", true},
		{"a sibling of the base", "/openai/v10/models", "/openai/v10/models", "/openai/v1", false},
		{"the base itself", "/openai/v1", "/openai/v1", "/openai/v1", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			clean := cleanPath([]byte(tc.path))
			if string(clean) != tc.clean {
				t.Errorf("cleanPath(%q) = %q, want %q", tc.path, clean, tc.clean)
			}
			up := &upstream{pathPrefix: tc.base}
			if got := up.reaches(clean); got != tc.reaches {
				t.Errorf("base %q reaches(%q) = %v, want %v", tc.base, clean, got, tc.reaches)
			}
		})
	}
}

// BenchmarkCleanPath is the check every forwarded request pays: a clean path
// is returned as it is.
func BenchmarkCleanPath(b *testing.B) {
	p := []byte("/v1/chat/completions")
	b.ReportAllocs()
	for b.Loop() {
		_ = cleanPath(p)
	}
}
