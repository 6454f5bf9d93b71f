package proxy

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestNewFailingLateLeavesNoGoroutines: a config that fails after the cache
// (Redis client, probe) and the knowledge watcher are open — a route's block no
// stage knows — leaves nothing running once New returned its error.
func TestNewFailingLateLeavesNoGoroutines(t *testing.T) {
	// Not parallel, nor its cases: each counts the process's goroutines.
	cases := []struct {
		name, redisURL string
	}{
		// Nothing listens there: the cache starts degraded and probes it.
		{name: "redis down", redisURL: "redis://127.0.0.1:1/0"},
		{name: "redis up", redisURL: os.Getenv("FACTGATE_TEST_REDIS_URL")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.redisURL == "" {
				t.Skipf("FACTGATE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): %s, which needs a shared Redis, did not run", t.Name())
			}
			overlay := filepath.Join(t.TempDir(), "ra3-corona.overlay.json")
			config := `
upstreams:
  mock: {base_url: "http://127.0.0.1:1/v1"}
cache:
  redis: {url: "` + tc.redisURL + `", key_prefix: "factgate:test:leak:"}
knowledge:
  overlays: {ra3-corona: "` + overlay + `"}
routes:
  - name: default
    default: true
    upstream: mock
    pack: ra3
    no_such_stage: {}
`
			cfg, err := ParseConfig([]byte(config), "leak.yaml")
			if err != nil {
				t.Fatalf("config: %v", err)
			}
			settle()
			before := runtime.NumGoroutine()
			srv, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
			if err == nil {
				t.Fatal("New accepted a route block no stage knows")
			}
			if srv != nil {
				t.Errorf("New returned a server with its error %v", err)
			}
			if !strings.Contains(err.Error(), "no_such_stage") {
				t.Fatalf("New failed early, not at the chain: %v", err)
			}
			// Closing is synchronous, but a closed connection's reader ends on its own.
			deadline := time.Now().Add(10 * time.Second)
			for runtime.NumGoroutine() > before {
				if time.Now().After(deadline) {
					buf := make([]byte, 1<<20)
					t.Fatalf("%d goroutines before a failing New, %d after it returned %q:\n%s", before, runtime.NumGoroutine(), err, buf[:runtime.Stack(buf, true)])
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// settle lets goroutines that earlier tests left ending (idle connections,
// timers) end before a count.
func settle() {
	prev := -1
	for i := 0; i < 100; i++ {
		n := runtime.NumGoroutine()
		if n == prev {
			return
		}
		prev = n
		time.Sleep(20 * time.Millisecond)
	}
}
