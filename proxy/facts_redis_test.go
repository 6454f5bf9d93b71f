package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factgate/factgate/cache/redistest"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/interceptors/validate"
)

// Integration tests of the facts stage against a real Redis: the shared one from
// FACTGATE_TEST_REDIS_URL (CI sets it; each test uses its own key prefix and
// deletes only its keys), and for the outage test a redis-server of its own.

func factsRedisURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("FACTGATE_TEST_REDIS_URL")
	if url == "" {
		t.Skipf("FACTGATE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): %s, which needs a shared Redis, did not run", t.Name())
	}
	return url
}

var factsUnsafeKeyChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// factsKeyPrefix is a key prefix of this test alone; its keys are deleted at
// cleanup.
func factsKeyPrefix(t *testing.T, url string) string {
	t.Helper()
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	prefix := "factgate:test:" + factsUnsafeKeyChars.ReplaceAllString(t.Name(), "_") + ":" + hex.EncodeToString(nonce[:]) + ":"
	t.Cleanup(func() {
		client := factsRedisClient(t, url)
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
	})
	return prefix
}

func factsRedisClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("FACTGATE_TEST_REDIS_URL: %v", err)
	}
	return redis.NewClient(opts)
}

// factsRedisCacheBlock is the cache block of a proxy using the Redis at url.
func factsRedisCacheBlock(url, prefix string) string {
	return fmt.Sprintf("cache:\n  redis:\n    url: %q\n    key_prefix: %q\n", url, prefix)
}

// waitFor polls cond every 10ms for up to 10s.
func factsWaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFactsSharedAcrossInstances: the index one proxy built is served to another
// proxy sharing its Redis from the shared tier, without a build.
func TestFactsSharedAcrossInstances(t *testing.T) {
	t.Parallel()
	url := factsRedisURL(t)
	prefix := factsKeyPrefix(t, url)
	probeA, probeB := &factsProbe{}, &factsProbe{}
	a := newFactsHarness(t, factsRedisCacheBlock(url, prefix), probeA)
	b := newFactsHarness(t, factsRedisCacheBlock(url, prefix), probeB)
	log := factsPart(t, 1)

	a.factsChat(t, log, "")
	built := probeA.last(t)
	if built.info.Source != facts.SourceBuilt {
		t.Fatalf("first request on A: source %q, want built", built.info.Source)
	}
	client := factsRedisClient(t, url)
	defer client.Close()
	factsWaitFor(t, "A's index in Redis", func() bool {
		n, _ := client.Exists(context.Background(), prefix+facts.SharedKeyPrefix+built.info.Key).Result()
		return n == 1
	})

	b.factsChat(t, log, "")
	got := probeB.last(t)
	if got.info.Source != facts.SourceShared || got.info.Key != built.info.Key {
		t.Fatalf("B: source %q key %q, want shared %q", got.info.Source, got.info.Key, built.info.Key)
	}
	if got.ix.Len() != built.ix.Len() || !got.ix.ActedAs(246, facts.RoleBuilder) {
		t.Errorf("B's index has %d operations, A's %d", got.ix.Len(), built.ix.Len())
	}
	regB := b.srv.Metrics()
	if n := factsCounter(t, regB, "factgate_fact_index_total", map[string]string{"route": "ra3", "source": "shared"}); n != 1 {
		t.Errorf("B counted %v shared indexes, want 1", n)
	}
	if n := factsCounter(t, regB, "factgate_fact_index_build_seconds", nil); n != 0 {
		t.Errorf("B built %v indexes, want 0", n)
	}
}

// TestFactsSessionAcrossInstances: c17's segments 1 and 3 go to instance A and
// segment 2 to instance B; the index used for segment 3 has all three, so c17's
// answer (citing part 1) validates without an issue at or above WeakEvidence —
// while checked against part 3 alone it has some.
func TestFactsSessionAcrossInstances(t *testing.T) {
	t.Parallel()
	url := factsRedisURL(t)
	prefix := factsKeyPrefix(t, url)
	probeA, probeB := &factsProbe{}, &factsProbe{}
	a := newFactsHarness(t, factsRedisCacheBlock(url, prefix), probeA, factsValidating)
	b := newFactsHarness(t, factsRedisCacheBlock(url, prefix), probeB, factsValidating)
	const session = "c17-across"

	a.factsChat(t, factsPart(t, 1), session)
	b.factsChat(t, factsPart(t, 2), session)
	if got := probeB.last(t); got.info.Segments != 2 {
		t.Fatalf("B merged %d segments for part 2, want 2 (A's part 1 through Redis)", got.info.Segments)
	}
	client := factsRedisClient(t, url)
	defer client.Close()
	factsWaitFor(t, "B's index of part 2 in Redis", func() bool {
		n, _ := client.Exists(context.Background(), prefix+facts.SharedKeyPrefix+probeB.last(t).info.Key).Result()
		return n == 1
	})
	header := a.factsChat(t, factsPart(t, 3), session)
	if severe := draftIssuesAtLeastWeak(t, header); severe != "" {
		t.Errorf("c17's answer to part 3 of the session has issues %s, want none at or above WeakEvidence", severe)
	}
	alone := b.factsChat(t, factsPart(t, 3), "")
	t.Logf("c17 answer: with the session %s; against part 3 alone %s", header.Get(validate.HeaderIssues), alone.Get(validate.HeaderIssues))
	if severe := draftIssuesAtLeastWeak(t, alone); severe == "" {
		t.Error("c17's answer checked against part 3 alone has no issue: the session test proves nothing")
	}

	last := probeA.all()[1]
	if last.err != nil || last.info.Segments != 3 || last.info.MissingSegments != 0 {
		t.Fatalf("A for part 3: %+v, %v", last.info, last.err)
	}
	if _, ok := last.ix.Match(factsPackAt124, 500*time.Millisecond); !ok {
		t.Error("the index used for part 3 does not find 246's pack at 1:24 (part 1)")
	}
	if last.ix.Count("produce") <= probeA.all()[0].ix.Count("produce") {
		t.Error("the index used for part 3 lacks part 2's productions")
	}
	members, err := client.SMembers(context.Background(), prefix+facts.SessionSetKey(session)).Result()
	if err != nil || len(members) != 3 {
		t.Errorf("the session's set in Redis: %v, %v; want three fact keys", members, err)
	}
}

// readiness fetches /readyz.
func (h *harness) factsReadiness(t testing.TB) (status string, cache map[string]any) {
	t.Helper()
	resp, err := http.Get(h.base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string                    `json:"status"`
		Checks map[string]map[string]any `json:"checks"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("/readyz body %s: %v", b, err)
	}
	return r.Status, r.Checks["cache"]
}

// TestFactsRedisKilledMidBurst kills the proxy's Redis while a burst of requests
// runs through the facts stage: every request still succeeds with its facts,
// /readyz says degraded and names the cache, the errors are counted; Redis back
// on the same port makes /readyz ready again.
func TestFactsRedisKilledMidBurst(t *testing.T) {
	t.Parallel()
	server := redistest.Start(t, 0)
	block := fmt.Sprintf(`cache:
  redis:
    addrs: [%q]
    dial_timeout: 200ms
    read_timeout: 200ms
    write_timeout: 200ms
  tiered:
    probe_interval: 50ms
    error_backoff: 20ms
`, server.Addr())
	probe := &factsProbe{}
	h := newFactsHarness(t, block, probe)
	if status, _ := h.factsReadiness(t); status != "ready" {
		t.Fatalf("/readyz before the kill: %s", status)
	}

	const requests, workers = 60, 6
	base := factsPart(t, 1)
	jobs := make(chan int, requests)
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	var done, ok atomic.Int64
	var failures sync.Map
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				// Every request is a new log in one of a few sessions, so every one
				// reads and writes Redis (index, session set).
				body, _ := json.Marshal(map[string]any{
					"model":    "ra3-analyst",
					"messages": []map[string]string{{"role": "user", "content": base + "\n请求 " + strconv.Itoa(i)}},
				})
				status, _, resp, err := h.tryPost("/v1/chat/completions", string(body), "X-Factgate-Session", "burst-"+strconv.Itoa(i%4))
				if err != nil {
					failures.Store(i, err.Error())
				} else if status == 200 {
					ok.Add(1)
				} else {
					failures.Store(i, fmt.Sprintf("status %d: %s", status, resp))
				}
				done.Add(1)
			}
		})
	}
	factsWaitFor(t, "a third of the burst", func() bool { return done.Load() >= requests/3 })
	server.Kill()
	wg.Wait()

	failures.Range(func(k, v any) bool {
		t.Errorf("request %v failed: %v", k, v)
		return true
	})
	if ok.Load() != requests {
		t.Fatalf("%d of %d requests succeeded", ok.Load(), requests)
	}
	seen := probe.all()
	if len(seen) != requests {
		t.Fatalf("the facts stage saw %d requests, want %d", len(seen), requests)
	}
	for i, p := range seen {
		if p.err != nil || !p.ix.HasFacts() || p.info.Segments < 1 {
			t.Errorf("request %d: facts %+v, %v", i, p.info, p.err)
		}
	}

	status, check := h.factsReadiness(t)
	detail, _ := check["detail"].(string)
	if status != "degraded" || check["ok"] != false || !strings.Contains(detail, "degraded, serving from memory") {
		t.Errorf("/readyz with Redis dead: %s, cache check %v", status, check)
	}
	if n := factsCounter(t, h.srv.Metrics(), "factgate_cache_errors_total", nil); n == 0 {
		t.Error("factgate_cache_errors_total counted no Redis error")
	} else {
		t.Logf("with Redis dead: %d requests served, %v Redis errors absorbed; /readyz cache check: %v", ok.Load(), n, check)
	}

	redistest.Start(t, server.Port)
	factsWaitFor(t, "/readyz to recover", func() bool {
		status, _ := h.factsReadiness(t)
		return status == "ready"
	})
	h.factsChat(t, base, "burst-0")
	if p := probe.last(t); !p.ix.HasFacts() {
		t.Errorf("after recovery: %+v, %v", p.info, p.err)
	}
}
