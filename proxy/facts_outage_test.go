package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factgate/factgate/cache/redistest"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/interceptors/validate"
)

// Tests of sessions and requests across a Redis that dies, comes back empty, or
// hangs. Each starts a redis-server of its own (cache/redistest) and two proxies
// in this process sharing it.

// outageCacheBlock is the cache block of a proxy on the test's own Redis at addr:
// short timeouts and a fast probe so the test runs in seconds, and a small
// connection pool, so that calls queue for a connection as they do under load.
func outageCacheBlock(addr string, timeout time.Duration) string {
	return fmt.Sprintf(`cache:
  redis:
    addrs: [%q]
    dial_timeout: %s
    read_timeout: %s
    write_timeout: %s
    pool_size: 4
  tiered:
    probe_interval: 50ms
    error_backoff: 100ms
`, addr, timeout, timeout, timeout)
}

// waitReady polls /readyz until the proxy reports ready (Redis answered again and
// the cache recovered).
func (h *harness) waitReady(t testing.TB, what string) {
	t.Helper()
	factsWaitFor(t, what, func() bool {
		status, _ := h.factsReadiness(t)
		return status == "ready"
	})
}

// TestFactsSessionSurvivesRedisRestartEmpty: c17's session is sent in segments
// that alternate between replicas A and B. Part 1 reaches Redis; then Redis is
// killed and parts 2 (on B) and 3 (on A) are served from memory; then Redis comes
// back empty. After recovery both replicas check c17's answer (which cites part 1)
// against the whole session: three segments, none missing, no issue. Before the
// fix the indexes built during the outage lived only in their replica and part 1
// was lost with Redis, so B merged a partial session and reported a Contradiction.
func TestFactsSessionSurvivesRedisRestartEmpty(t *testing.T) {
	t.Parallel()
	server := redistest.Start(t, 0)
	block := outageCacheBlock(server.Addr(), 200*time.Millisecond)
	probeA, probeB := &factsProbe{}, &factsProbe{}
	a := newFactsHarness(t, block, probeA, factsValidating)
	b := newFactsHarness(t, block, probeB, factsValidating)
	const session = "c17-outage"

	a.factsChat(t, factsPart(t, 1), session)
	key1 := probeA.last(t).info.Key
	client := factsRedisClient(t, "redis://"+server.Addr()+"/0")
	defer client.Close()
	factsWaitFor(t, "part 1's index in Redis", func() bool {
		n, _ := client.Exists(context.Background(), "factgate:v1:"+facts.SharedKeyPrefix+key1).Result()
		return n == 1
	})

	server.Kill()
	b.factsChat(t, factsPart(t, 2), session)
	a.factsChat(t, factsPart(t, 3), session)
	key2, key3 := probeB.last(t).info.Key, probeA.last(t).info.Key

	redistest.Start(t, server.Port) // empty: nothing on disk
	a.waitReady(t, "A to see Redis again")
	b.waitReady(t, "B to see Redis again")

	// Recovery writes back in the background; wait (generously) until Redis holds
	// the whole session again, and say what it holds if it never does.
	setKey := "factgate:v1:" + facts.SessionSetKey(session)
	var members []string
	var present int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		members, _ = client.SMembers(context.Background(), setKey).Result()
		present, _ = client.Exists(context.Background(),
			"factgate:v1:"+facts.SharedKeyPrefix+key1,
			"factgate:v1:"+facts.SharedKeyPrefix+key2,
			"factgate:v1:"+facts.SharedKeyPrefix+key3).Result()
		if len(members) == 3 && present == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("10s after recovery Redis holds session members %v and %d of the 3 segment indexes (part 1 %s, part 2 %s, part 3 %s)", members, present, key1, key2, key3)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	// B checks part 3 (new to B) and A a follow-up without a log: both against
	// the whole session.
	headerB := b.factsChat(t, factsPart(t, 3), session)
	headerA := a.factsChat(t, "继续：246 后来怎样了？", session)
	for _, c := range []struct {
		name   string
		header http.Header
		probe  *factsProbe
	}{{"B", headerB, probeB}, {"A", headerA, probeA}} {
		got := c.probe.last(t)
		if got.err != nil || got.info.Segments != 3 || got.info.MissingSegments != 0 {
			t.Errorf("replica %s after recovery: %d segments merged, %d missing (%v), want 3 and 0", c.name, got.info.Segments, got.info.MissingSegments, got.err)
		}
		if v := c.header.Get(validate.HeaderIssues); !strings.HasPrefix(v, "draft=0;") {
			t.Errorf("replica %s after recovery: %s %q, want draft=0 (c17's answer cites part 1)", c.name, validate.HeaderIssues, v)
		}
	}
}

// TestFactsRedisFrozen freezes the proxy's Redis (SIGSTOP: connections stay open,
// nothing answers) under a steady stream of session requests, then thaws it. No
// request may wait for Redis unboundedly: every call is bounded by the
// configured timeout (250ms here), pool waits and retries included, so every
// request sent while Redis is frozen is answered while it is still frozen —
// Redis is thawed only once they all were. (How long they took is logged, not
// asserted: under -race on a loaded machine a request's own work varies more
// than the bound.)
func TestFactsRedisFrozen(t *testing.T) {
	t.Parallel()
	server := redistest.Start(t, 0)
	const timeout = 250 * time.Millisecond
	probe := &factsProbe{}
	h := newFactsHarness(t, outageCacheBlock(server.Addr(), timeout), probe)
	base := factsPart(t, 1)

	var mu sync.Mutex
	var worst time.Duration
	var worstPhase string
	var failures []string
	send := func(phase string, i int) {
		body, _ := json.Marshal(map[string]any{
			"model":    "ra3-analyst",
			"messages": []map[string]string{{"role": "user", "content": base + "\n请求 " + phase + strconv.Itoa(i)}},
		})
		start := time.Now()
		status, _, resp := h.post(t, "/v1/chat/completions", string(body), reqcontext.HeaderSession, "frozen-"+strconv.Itoa(i%3))
		took := time.Since(start)
		mu.Lock()
		defer mu.Unlock()
		if status != 200 {
			failures = append(failures, fmt.Sprintf("%s %d: status %d: %s", phase, i, status, resp))
		}
		if took > worst {
			worst, worstPhase = took, phase
		}
	}
	burst := func(phase string, n int) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < n; i += 8 {
					send(phase, i)
				}
			})
		}
		wg.Wait()
	}

	burst("warm", 16)
	mu.Lock()
	warm := worst
	worst = 0
	mu.Unlock()

	// Freeze while requests are in flight, keep sending for well over the backoff
	// and probe intervals, then thaw and keep sending: the first calls after the
	// hang are bounded too.
	stop := make(chan struct{})
	var frozenWG sync.WaitGroup
	frozenWG.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			burst("frozen", 8)
		}
	})
	server.Freeze()
	time.Sleep(1500 * time.Millisecond) // traffic runs meanwhile
	close(stop)
	answered := make(chan struct{})
	go func() {
		frozenWG.Wait()
		close(answered)
	}()
	select {
	case <-answered:
	case <-time.After(60 * time.Second):
		// A request waiting on a call without a bound would wait until the thaw.
		server.Thaw()
		t.Fatal("requests sent while Redis was frozen were not answered while it stayed frozen: a Redis call is not bounded")
	}
	server.Thaw()
	burst("thawed", 32)

	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("slowest request: warm-up %v; while frozen or after %v (%s); call bound %v", warm, worst, worstPhase, timeout)
}

// TestFactsSessionSegmentGoneIsAWarning: a session names a segment whose index is
// gone from every cache tier (here deleted from Redis, as an eviction would, and
// never seen by replica B). B checks c17's answer, which cites that segment,
// against what is left: a Warning that says the facts are partial
// (facts.segments_missing), never a Contradiction built on them.
func TestFactsSessionSegmentGoneIsAWarning(t *testing.T) {
	t.Parallel()
	url := factsRedisURL(t)
	prefix := factsKeyPrefix(t, url)
	probeA, probeB := &factsProbe{}, &factsProbe{}
	a := newFactsHarness(t, factsRedisCacheBlock(url, prefix), probeA, factsValidating)
	b := newFactsHarness(t, factsRedisCacheBlock(url, prefix), probeB, factsValidating)
	const session = "c17-gone"

	a.factsChat(t, factsPart(t, 1), session)
	key1 := probeA.last(t).info.Key
	client := factsRedisClient(t, url)
	defer client.Close()
	factsWaitFor(t, "part 1's index in Redis", func() bool {
		n, _ := client.Exists(context.Background(), prefix+facts.SharedKeyPrefix+key1).Result()
		return n == 1
	})
	if err := client.Del(context.Background(), prefix+facts.SharedKeyPrefix+key1).Err(); err != nil {
		t.Fatal(err)
	}

	header := b.factsChat(t, factsPart(t, 3), session)
	got := probeB.last(t)
	if got.info.MissingSegments != 1 {
		t.Errorf("B: %d missing segments, want 1 (part 1)", got.info.MissingSegments)
	}
	if v := header.Get(validate.HeaderIssues); !strings.HasPrefix(v, "draft=W1;") {
		t.Errorf("B: %s %q, want draft=W1 (%s) and no Contradiction", validate.HeaderIssues, v, validate.CodeSegmentsMissing)
	}
}
