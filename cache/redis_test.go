package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/factgate/factgate/cache/redistest"
	"github.com/factgate/factgate/configs/units"
)

// Integration tests against a real Redis. The shared one comes from
// FACTGATE_TEST_REDIS_URL (CI sets it); each test works under its own key prefix and
// deletes only its own keys. The outage test starts its own redis-server instead.

// testRedisURL returns the shared test Redis or skips.
func testRedisURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("FACTGATE_TEST_REDIS_URL")
	if url == "" {
		t.Skipf("FACTGATE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): %s, which needs a shared Redis, did not run", t.Name())
	}
	return url
}

var unsafeKeyChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// uniquePrefix is a key prefix of this test alone; its keys are deleted at cleanup.
func uniquePrefix(t testing.TB, url string) string {
	t.Helper()
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	prefix := "factgate:test:" + unsafeKeyChars.ReplaceAllString(t.Name(), "_") + ":" + hex.EncodeToString(nonce[:]) + ":"
	t.Cleanup(func() {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return
		}
		client := redis.NewClient(opts)
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

func newTestRedis(t testing.TB) (*Redis, string) {
	t.Helper()
	url := testRedisURL(t)
	prefix := uniquePrefix(t, url)
	r, err := NewRedis(RedisConfig{URL: url, KeyPrefix: prefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if st := r.Status(); st.Degraded {
		t.Fatalf("test Redis %s unreachable: %s", url, st.LastError)
	}
	return r, prefix
}

func TestRedisRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name  string
		check func(t *testing.T, r *Redis)
	}{
		{
			name: "value",
			check: func(t *testing.T, r *Redis) {
				if err := r.Set(ctx, "facts:abc", []byte("index\x00bytes"), time.Minute); err != nil {
					t.Fatal(err)
				}
				got, ok, err := r.Get(ctx, "facts:abc")
				if err != nil || !ok || string(got) != "index\x00bytes" {
					t.Fatalf("Get = %q, %v, %v", got, ok, err)
				}
			},
		},
		{
			name: "absent value",
			check: func(t *testing.T, r *Redis) {
				got, ok, err := r.Get(ctx, "facts:none")
				if err != nil || ok || got != nil {
					t.Fatalf("Get = %q, %v, %v", got, ok, err)
				}
			},
		},
		{
			name: "delete",
			check: func(t *testing.T, r *Redis) {
				_ = r.Set(ctx, "trace:1", []byte("t"), 0)
				if err := r.Delete(ctx, "trace:1"); err != nil {
					t.Fatal(err)
				}
				if _, ok, _ := r.Get(ctx, "trace:1"); ok {
					t.Fatal("still there after Delete")
				}
			},
		},
		{
			name: "set members sorted",
			check: func(t *testing.T, r *Redis) {
				key := "session:" + HashTag("s1") + ":facts"
				for _, m := range []string{"seg3", "seg1", "seg2", "seg1"} {
					if err := r.SetAdd(ctx, key, m, time.Minute); err != nil {
						t.Fatal(err)
					}
				}
				got, err := r.SetMembers(ctx, key)
				if err != nil || !slices.Equal(got, []string{"seg1", "seg2", "seg3"}) {
					t.Fatalf("SetMembers = %q, %v", got, err)
				}
			},
		},
		{
			name: "counters",
			check: func(t *testing.T, r *Redis) {
				_ = r.HashIncr(ctx, "ab:r", map[string]int64{"a": 1, "b": 2}, time.Minute)
				_ = r.HashIncr(ctx, "ab:r", map[string]int64{"a": 4}, time.Minute)
				got, err := r.HashGetAll(ctx, "ab:r")
				if err != nil || got["a"] != 5 || got["b"] != 2 || len(got) != 2 {
					t.Fatalf("HashGetAll = %v, %v", got, err)
				}
			},
		},
		{
			name: "every kind gets its ttl, zero the default",
			check: func(t *testing.T, r *Redis) {
				_ = r.Set(ctx, "v", []byte("x"), 90*time.Second)
				_ = r.SetAdd(ctx, "s", "x", 90*time.Second)
				_ = r.HashIncr(ctx, "h", map[string]int64{"x": 1}, 90*time.Second)
				_ = r.Set(ctx, "d", []byte("x"), 0)
				for key, want := range map[string]time.Duration{"v": 90 * time.Second, "s": 90 * time.Second, "h": 90 * time.Second, "d": time.Hour} {
					ttl, err := r.client.PTTL(ctx, r.prefix+key).Result()
					if err != nil || ttl <= want-10*time.Second || ttl > want {
						t.Errorf("ttl of %s = %v, %v; want about %v", key, ttl, err, want)
					}
				}
			},
		},
		{
			name: "keys carry the prefix",
			check: func(t *testing.T, r *Redis) {
				_ = r.Set(ctx, "k", []byte("x"), time.Minute)
				n, err := r.client.Exists(ctx, r.prefix+"k").Result()
				if err != nil || n != 1 {
					t.Fatalf("EXISTS %sk = %d, %v", r.prefix, n, err)
				}
			},
		},
		{
			name: "wrong kind is an error that does not degrade",
			check: func(t *testing.T, r *Redis) {
				_ = r.Set(ctx, "v", []byte("x"), time.Minute)
				if err := r.SetAdd(ctx, "v", "m", time.Minute); err == nil {
					t.Fatal("SADD on a string key succeeded")
				}
				if st := r.Status(); st.Degraded {
					t.Fatalf("WRONGTYPE marked Redis degraded: %+v", st)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, _ := newTestRedis(t)
			tt.check(t, r)
		})
	}
}

// TestRedisReplicasShareRedis runs two proxy replicas' caches on the shared Redis:
// each sees the other's values, session members and A/B counters.
func TestRedisReplicasShareRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testRedisURL(t)
	prefix := uniquePrefix(t, url)
	replica := func() Cache {
		c, err := New(Config{Redis: &RedisConfig{URL: url, KeyPrefix: prefix}}, prometheus.NewRegistry(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if st := c.Status(); st.Backend != "memory+redis" || st.Degraded {
			t.Fatalf("Status = %+v", st)
		}
		return c
	}
	a, b := replica(), replica()
	session := "session:" + HashTag("sid-42") + ":facts"

	_ = a.Set(ctx, "facts:abc", []byte("index"), time.Minute)
	if v, ok, err := b.Get(ctx, "facts:abc"); err != nil || !ok || string(v) != "index" {
		t.Errorf("replica b reads %q, %v, %v", v, ok, err)
	}
	_ = a.SetAdd(ctx, session, "seg1", time.Minute)
	_ = b.SetAdd(ctx, session, "seg2", time.Minute)
	_ = a.SetAdd(ctx, session, "seg3", time.Minute)
	for name, c := range map[string]Cache{"a": a, "b": b} {
		if got, err := c.SetMembers(ctx, session); err != nil || !slices.Equal(got, []string{"seg1", "seg2", "seg3"}) {
			t.Errorf("replica %s sees %q, %v", name, got, err)
		}
	}
	_ = a.HashIncr(ctx, "ab:route", map[string]int64{"control.requests": 3}, time.Minute)
	_ = b.HashIncr(ctx, "ab:route", map[string]int64{"control.requests": 2, "terse.requests": 1}, time.Minute)
	for name, c := range map[string]Cache{"a": a, "b": b} {
		got, err := c.HashGetAll(ctx, "ab:route")
		if err != nil || got["control.requests"] != 5 || got["terse.requests"] != 1 {
			t.Errorf("replica %s sees counters %v, %v", name, got, err)
		}
	}
}

// TestRedisIncrGetAllIsAtomic: concurrent increments on two clients each read a
// distinct count — no two requests counting against one limit see the same total.
func TestRedisIncrGetAllIsAtomic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, prefix := newTestRedis(t)
	b, err := NewRedis(RedisConfig{URL: testRedisURL(t), KeyPrefix: prefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	const n = 40
	counts := make(chan int64, 2*n)
	errs := make(chan error, 2*n)
	for _, r := range []*Redis{a, b} {
		for range n {
			go func() {
				got, err := r.HashIncrGetAll(ctx, "ratelimit:{k}:1", map[string]int64{"requests": 1}, time.Minute)
				errs <- err
				counts <- got["requests"]
			}()
		}
	}
	seen := map[int64]bool{}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		seen[<-counts] = true
	}
	for i := int64(1); i <= 2*n; i++ {
		if !seen[i] {
			t.Fatalf("no increment read %d: the counts seen were %v", i, seen)
		}
	}
	if ttl := a.client.PTTL(ctx, prefix+"ratelimit:{k}:1").Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("the hash's ttl is %s, want at most 1m", ttl)
	}
}

// TestRedisKilledMidTest kills the cache's Redis while in use: every call still
// succeeds from memory, Status says degraded, errors are counted; Redis restarted
// on the same port brings the cache back, and what was written meanwhile reaches it.
func TestRedisKilledMidTest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := redistest.Start(t, 0)
	reg := prometheus.NewRegistry()
	c, err := New(Config{
		Redis:  &RedisConfig{Addrs: []string{server.Addr()}, DialTimeout: units.Duration(200 * time.Millisecond)},
		Tiered: TieredConfig{ProbeInterval: units.Duration(50 * time.Millisecond), ErrorBackoff: units.Duration(20 * time.Millisecond)},
	}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	session := "session:" + HashTag("sid") + ":facts"

	_ = c.Set(ctx, "facts:abc", []byte("index"), time.Minute)
	_ = c.SetAdd(ctx, session, "seg1", time.Minute)
	_ = c.HashIncr(ctx, "ab:r", map[string]int64{"a": 1}, time.Minute)
	if st := c.Status(); st.Degraded {
		t.Fatalf("degraded before the kill: %+v", st)
	}

	server.Kill()
	for i := range 20 { // spans several backoffs, so Redis is retried and fails again
		if v, ok, err := c.Get(ctx, "facts:abc"); err != nil || !ok || string(v) != "index" {
			t.Fatalf("Get %d with Redis dead = %q, %v, %v", i, v, ok, err)
		}
		if err := c.SetAdd(ctx, session, "seg2", time.Minute); err != nil {
			t.Fatalf("SetAdd with Redis dead: %v", err)
		}
		if got, err := c.SetMembers(ctx, session); err != nil || !slices.Equal(got, []string{"seg1", "seg2"}) {
			t.Fatalf("SetMembers with Redis dead = %q, %v", got, err)
		}
		if err := c.HashIncr(ctx, "ab:r", map[string]int64{"a": 1}, time.Minute); err != nil {
			t.Fatalf("HashIncr with Redis dead: %v", err)
		}
		if err := c.Set(ctx, "trace:"+strconv.Itoa(i), []byte("t"), time.Minute); err != nil {
			t.Fatalf("Set with Redis dead: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := c.Status()
	if !st.Degraded || st.LastError == "" {
		t.Fatalf("Status with Redis dead = %+v, want degraded with the error", st)
	}
	t.Logf("degraded status: %+v", st)
	var counted float64
	for _, op := range []string{"get", "set", "set_add", "set_members", "hash_incr", "ping"} {
		counted += errorCount(t, reg, op)
	}
	if counted == 0 {
		t.Fatal("no Redis error counted in factgate_cache_errors_total")
	}
	if got, _ := c.HashGetAll(ctx, "ab:r"); got["a"] != 21 {
		t.Errorf("counter from memory = %d, want 21", got["a"])
	}

	restarted := redistest.Start(t, server.Port)
	waitFor(t, "the cache to recover", func() bool { return !c.Status().Degraded })
	// The restarted Redis is empty (no persistence); the writes made during the
	// outage are replayed into it.
	check := redis.NewClient(&redis.Options{Addr: restarted.Addr()})
	defer check.Close()
	waitFor(t, "the outage's writes to be replayed", func() bool {
		members, _ := check.SMembers(ctx, DefaultKeyPrefix+session).Result()
		count, _ := check.HGet(ctx, DefaultKeyPrefix+"ab:r", "a").Int64()
		return slices.Contains(members, "seg2") && count == 20
	})
	if err := c.Set(ctx, "after", []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, err := check.Get(ctx, DefaultKeyPrefix+"after").Result(); err != nil || v != "x" {
		t.Fatalf("a write after recovery did not reach Redis: %q, %v", v, err)
	}
}

func BenchmarkRedisGet(b *testing.B) {
	r, _ := newTestRedis(b)
	ctx := context.Background()
	value := make([]byte, 4096)
	if err := r.Set(ctx, "facts:bench", value, time.Minute); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := r.Get(ctx, "facts:bench"); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkTieredGetRedisHit(b *testing.B) {
	url := testRedisURL(b)
	prefix := uniquePrefix(b, url)
	writer, err := New(Config{Redis: &RedisConfig{URL: url, KeyPrefix: prefix}}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer writer.Close()
	ctx := context.Background()
	_ = writer.Set(ctx, "facts:bench", make([]byte, 4096), time.Minute)
	// A fresh replica with an empty memory tier, whose local copy is dropped each
	// round, so every Get is a Redis round trip plus the memory fill.
	reader, err := New(Config{Redis: &RedisConfig{URL: url, KeyPrefix: prefix}}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()
	tiered := reader.(*Tiered)
	b.ReportAllocs()
	for b.Loop() {
		_ = tiered.memory.Delete(ctx, "facts:bench")
		if _, ok, err := tiered.Get(ctx, "facts:bench"); err != nil || !ok {
			b.Fatal(fmt.Sprint(ok, err))
		}
	}
}

// TestRedisCallsBoundedWhenFrozen freezes Redis (SIGSTOP: connections stay open,
// nothing answers) under concurrent calls, more than the pool has connections:
// each call returns its error within its call timeout — pool wait, dial, retry
// and backoff included — instead of adding them up.
func TestRedisCallsBoundedWhenFrozen(t *testing.T) {
	t.Parallel()
	server := redistest.Start(t, 0)
	const bound = 200 * time.Millisecond
	r, err := NewRedis(RedisConfig{Addrs: []string{server.Addr()}, DialTimeout: units.Duration(bound), ReadTimeout: units.Duration(bound), WriteTimeout: units.Duration(bound), PoolSize: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx := context.Background()
	if err := r.Set(ctx, "k", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	server.Freeze()
	defer server.Thaw()
	var mu sync.Mutex
	var worst time.Duration
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 3 {
				start := time.Now()
				var err error
				if (i+j)%2 == 0 {
					_, _, err = r.Get(ctx, "k")
				} else {
					err = r.SetAdd(ctx, "s", "m", time.Minute)
				}
				took := time.Since(start)
				mu.Lock()
				worst = max(worst, took)
				mu.Unlock()
				if err == nil {
					t.Errorf("call %d/%d succeeded against a frozen Redis", i, j)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("slowest call against a frozen Redis: %v (call timeout %v)", worst, bound)
	if worst > 3*bound {
		t.Errorf("a call took %v against a frozen Redis; want at most 3x its %v call timeout", worst, bound)
	}
	if !r.Status().Degraded {
		t.Error("a frozen Redis is not reported degraded")
	}
}
