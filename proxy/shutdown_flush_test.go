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
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/cache/redistest"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// TestShutdownFlushesWhatRedisMissed: the writes a replica kept while its Redis
// was down (A/B counters, traces, fact write-backs) are written at shutdown when
// Redis is back, or — Redis still down at the deadline — counted in
// factgate_shutdown_unwritten_total and logged at WARN by kind, and Shutdown
// says so: never a silent loss.
func TestShutdownFlushesWhatRedisMissed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		// server is the server block; the probe is slow (30s) unless it says
		// otherwise, so that only the shutdown can find Redis back.
		server, tiered string
		requests       int
		redisBack      bool
	}{
		{"redis back just before SIGTERM, drain_grace 0s", "{listen: \"127.0.0.1:0\", drain_grace: 0s, shutdown_timeout: 20s}", "{probe_interval: 30s, error_backoff: 100ms}", 20, true},
		{"redis back, a 3s grace, traces read by another replica", "{listen: \"127.0.0.1:0\", drain_grace: 3s, shutdown_timeout: 20s}", "{probe_interval: 300ms, error_backoff: 100ms}", 30, true},
		{"redis still down at SIGTERM", "{listen: \"127.0.0.1:0\", drain_grace: 0s, shutdown_timeout: 2s}", "{probe_interval: 30s, error_backoff: 100ms}", 20, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			redisSrv := redistest.Start(t, 0)
			port := redisSrv.Port
			block := fmt.Sprintf("cache:\n  redis: {url: \"redis://%s/0\", dial_timeout: 300ms, read_timeout: 300ms, write_timeout: 300ms}\n  tiered: %s\n", redisSrv.Addr(), tc.tiered)
			config := strings.Replace(strings.Replace(shutdownConfig, "%CACHE%", block, 1),
				`server: {listen: "127.0.0.1:0", drain_grace: 0s, shutdown_timeout: 20s}`, "server: "+tc.server, 1)

			mock := mockupstream.New(mockupstream.Options{})
			if err := mock.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mock.Close() })
			cfg, err := ParseConfig([]byte(strings.ReplaceAll(config, "%MOCK%", mock.URL())), "flush.yaml")
			if err != nil {
				t.Fatal(err)
			}
			logs := &syncWriter{w: &bytes.Buffer{}}
			srv, err := New(cfg, WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			ctx, sigterm := context.WithCancel(context.Background())
			defer sigterm()
			served := make(chan error, 1)
			go func() { served <- srv.ListenAndServe(ctx) }()
			base := "http://" + listenAddr(t, logs, served)

			redisSrv.Kill() // SIGKILL: everything it held is gone
			user, _ := json.Marshal("分析这局录像。\n\n" + replayText)
			ids := make([]string, tc.requests)
			for i := range ids {
				body := fmt.Sprintf(`{"model":"ra3-analyst","user":"u%d","messages":[{"role":"user","content":%s}]}`, i, user)
				req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", harnessCredential)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("request %d while Redis is down: %d %s", i, resp.StatusCode, b)
				}
				ids[i] = resp.Header.Get("X-Factgate-Trace-Id")
			}
			if tc.redisBack {
				redisSrv = redistest.Start(t, port) // back, empty
			}
			stopped := time.Now()
			sigterm()
			var shutdownErr error
			select {
			case shutdownErr = <-served:
			case <-time.After(40 * time.Second):
				t.Fatal("ListenAndServe did not return after SIGTERM")
			}
			took := time.Since(stopped)

			if !tc.redisBack {
				if shutdownErr == nil || !strings.Contains(shutdownErr.Error(), "writes Redis did not take are lost") {
					t.Errorf("Shutdown returned %v, want the lost writes named", shutdownErr)
				}
				if took > 6*time.Second {
					t.Errorf("the shutdown took %v with shutdown_timeout 2s", took)
				}
				var warn gjson.Result
				for line := range strings.Lines(logs.String()) {
					if l := gjson.Parse(line); strings.HasPrefix(l.Get("msg").Str, "shutdown: writes Redis did not take") {
						warn = l
					}
				}
				if warn.Get("level").Str != "WARN" || warn.Get("counters").Int() < 1 || warn.Get("traces").Int() != int64(tc.requests) {
					t.Fatalf("the shutdown's WARN line: %s, want counters and %d traces", warn.Raw, tc.requests)
				}
				families, err := srv.Metrics().Gather()
				if err != nil {
					t.Fatal(err)
				}
				counted := map[string]float64{}
				for _, f := range families {
					if f.GetName() == "factgate_shutdown_unwritten_total" {
						for _, m := range f.GetMetric() {
							counted[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
						}
					}
				}
				if counted["traces"] != float64(tc.requests) || counted["counters"] < 1 {
					t.Errorf("factgate_shutdown_unwritten_total: %v, want traces %d and counters", counted, tc.requests)
				}
				return
			}
			if shutdownErr != nil {
				t.Fatalf("Shutdown with Redis back: %v\n%s", shutdownErr, grepLines(logs.String(), "WARN"))
			}
			// Another replica, on the same Redis, sees all of it.
			h := newHarness(t, "", strings.ReplaceAll(config, "server: "+tc.server, "server: {drain_grace: 0s}"))
			if counted := reportedRequests(t, h); counted != int64(tc.requests) {
				t.Errorf("another replica's report counts %d of the %d requests", counted, tc.requests)
			}
			readable := readableTraces(t, h, ids)
			if readable != tc.requests {
				t.Errorf("%d of %d traces are readable from another replica", readable, tc.requests)
			}
		})
	}
}
