package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors/abtest"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// slowWrites delays every cache write, as a Redis under load does: the writes
// the last requests leave behind are still in flight when Shutdown starts.
type slowWrites struct {
	cache.Cache
	delay time.Duration
}

func (c slowWrites) wait(ctx context.Context) error {
	t := time.NewTimer(c.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c slowWrites) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	return c.Cache.Set(ctx, key, value, ttl)
}

func (c slowWrites) SetAdd(ctx context.Context, key, member string, ttl time.Duration) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	return c.Cache.SetAdd(ctx, key, member, ttl)
}

func (c slowWrites) HashIncr(ctx context.Context, key string, deltas map[string]int64, ttl time.Duration) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	return c.Cache.HashIncr(ctx, key, deltas, ttl)
}

// withSlowWrites builds the cache the config describes, as New does — Shutdown
// closes it — with every write delayed.
func withSlowWrites(delay time.Duration) Option {
	return func(s *Server) error {
		c, err := cache.New(s.cfg.Cache, s.metrics.reg, s.log)
		if err != nil {
			return err
		}
		s.cache = slowWrites{Cache: c, delay: delay}
		s.closers = append(s.closers, c.Close)
		return nil
	}
}

// shutdownConfig is a route with an experiment, traces and the facts stage,
// every one of which writes to Redis in the background after the answer.
const shutdownConfig = `
server: {listen: "127.0.0.1:0", drain_grace: 0s, shutdown_timeout: 20s}
upstreams:
  mock: {base_url: "%MOCK%"}
routes:
  - name: ra3
    models: [ra3-analyst]
    upstream: mock
    pack: ra3
    facts: {}
    experiment:
      name: shutdown
      control: a
      variants:
        - {name: a, weight: 1}
        - {name: b, weight: 1}
%CACHE%
`

// TestShutdownLosesNoBackgroundWrite: SIGTERM (ListenAndServe's context
// cancelled) right after the last of N answers, with every cache write slow, and
// still a fresh proxy on the same Redis counts exactly N requests in the
// experiment's report, finds every trace, and the fact index the requests built.
func TestShutdownLosesNoBackgroundWrite(t *testing.T) {
	t.Parallel()
	url, prefix, client := abRedis(t)
	const n = 8
	config := strings.Replace(shutdownConfig, "%CACHE%", fmt.Sprintf("cache:\n  redis:\n    url: %q\n    key_prefix: %q\n", url, prefix), 1)

	// The first process: serves N requests, then gets SIGTERM.
	mock := mockupstream.New(mockupstream.Options{})
	if err := mock.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg, err := ParseConfig([]byte(strings.ReplaceAll(config, "%MOCK%", mock.URL())), "shutdown.yaml")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{w: &bytes.Buffer{}}
	// Writes take longer than an answer waits for its trace (traceSaveWait), and
	// far less than the time each is allowed (traceSaveTimeout, counterWriteTimeout).
	srv, err := New(cfg, WithLogger(slog.New(slog.NewJSONHandler(logs, nil))), withSlowWrites(3*traceSaveWait))
	if err != nil {
		t.Fatal(err)
	}
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe(ctx) }()
	base := "http://" + listenAddr(t, logs, served)

	user, _ := json.Marshal("分析这局录像。\n\n" + replayText)
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"ra3-analyst","user":"u%d","messages":[{"role":"user","content":%s}]}`, i, user)
			req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", harnessCredential)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				errs[i] = fmt.Errorf("status %d: %s", resp.StatusCode, b)
			}
			ids[i] = resp.Header.Get("X-Factgate-Trace-Id")
		})
	}
	wg.Wait()
	sigterm()
	for i, err := range errs {
		if err != nil || ids[i] == "" {
			t.Fatalf("request %d: %v (trace id %q)", i, err, ids[i])
		}
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ListenAndServe after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ListenAndServe did not return after SIGTERM")
	}

	// The next process, on the same Redis.
	h := newHarness(t, "", config)
	if counted := reportedRequests(t, h); counted != n {
		t.Errorf("the report counts %d requests, want %d", counted, n)
	}
	if lost := n - readableTraces(t, h, ids); lost > 0 {
		t.Errorf("%d of %d traces were lost in the shutdown", lost, n)
	}
	keys, err := client.Keys(context.Background(), prefix+"facts:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Errorf("fact indexes in Redis: %v, want the one the requests built", keys)
	}
}

// reportedRequests is how many requests the one experiment of h's report counts.
func reportedRequests(t *testing.T, h *harness) int64 {
	t.Helper()
	resp, err := http.Get(h.base + abtest.ReportPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rep abtest.Report
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Experiments) != 1 {
		t.Fatalf("%s: %d %s", abtest.ReportPath, resp.StatusCode, b)
	}
	counted := int64(0)
	for _, v := range rep.Experiments[0].Variants {
		counted += v.Requests
	}
	return counted
}

// readableTraces is how many of the traces ids h serves to the harness client.
func readableTraces(t *testing.T, h *harness, ids []string) int {
	t.Helper()
	readable := 0
	for _, id := range ids {
		resp, err := h.getTrace(id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 && gjson.GetBytes(b, "id").Str == id {
			readable++
		}
	}
	return readable
}

// listenAddr waits for ListenAndServe to say where it listens.
func listenAddr(t *testing.T, logs *syncWriter, served <-chan error) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for line := range strings.Lines(logs.String()) {
			if gjson.Get(line, "msg").Str == "factgate serving" {
				return gjson.Get(line, "listen").Str
			}
		}
		select {
		case err := <-served:
			t.Fatalf("ListenAndServe: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy never said it serves:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
