package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeRedis is a remoteBackend kept in memory that can be switched off, standing in
// for a shared Redis in unit tests. Several Tiered may share one.
type fakeRedis struct {
	store *Memory
	down  atomic.Bool
	calls atomic.Int64
}

func newFakeRedis() *fakeRedis { return &fakeRedis{store: NewMemory(MemoryConfig{})} }

var errFakeDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (f *fakeRedis) check() error {
	f.calls.Add(1)
	if f.down.Load() {
		return errFakeDown
	}
	return nil
}

func (f *fakeRedis) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := f.check(); err != nil {
		return nil, false, err
	}
	return f.store.Get(ctx, key)
}

func (f *fakeRedis) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.store.Set(ctx, key, slices.Clone(value), ttl)
}

func (f *fakeRedis) Delete(ctx context.Context, key string) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.store.Delete(ctx, key)
}

func (f *fakeRedis) SetAdd(ctx context.Context, key, member string, ttl time.Duration) error {
	return f.addMembers(ctx, key, []string{member}, ttl)
}

func (f *fakeRedis) addMembers(_ context.Context, key string, members []string, ttl time.Duration) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.store.addMembers(key, members, ttl)
}

func (f *fakeRedis) SetMembers(ctx context.Context, key string) ([]string, error) {
	members, _, err := f.membersWithTTL(ctx, key)
	return members, err
}

func (f *fakeRedis) membersWithTTL(ctx context.Context, key string) ([]string, time.Duration, error) {
	if err := f.check(); err != nil {
		return nil, 0, err
	}
	members, err := f.store.SetMembers(ctx, key)
	return members, 0, err
}

func (f *fakeRedis) HashIncr(ctx context.Context, key string, deltas map[string]int64, ttl time.Duration) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.store.HashIncr(ctx, key, deltas, ttl)
}

func (f *fakeRedis) HashGetAll(ctx context.Context, key string) (map[string]int64, error) {
	counters, _, err := f.countersWithTTL(ctx, key)
	return counters, err
}

func (f *fakeRedis) HashIncrGetAll(ctx context.Context, key string, deltas map[string]int64, ttl time.Duration) (map[string]int64, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.store.HashIncrGetAll(ctx, key, deltas, ttl)
}

func (f *fakeRedis) countersWithTTL(ctx context.Context, key string) (map[string]int64, time.Duration, error) {
	if err := f.check(); err != nil {
		return nil, 0, err
	}
	counters, err := f.store.HashGetAll(ctx, key)
	return counters, 0, err
}

func (f *fakeRedis) Ping(context.Context) error { return f.check() }
func (f *fakeRedis) Status() Status {
	if f.down.Load() {
		return Status{Backend: "redis", Degraded: true, LastError: errFakeDown.Error()}
	}
	return Status{Backend: "redis"}
}
func (f *fakeRedis) Close() error { return nil }

// testClock is a Tiered's wall clock, moved by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type tieredFixture struct {
	cache  *Tiered
	remote *fakeRedis
	reg    *prometheus.Registry
	clock  *testClock
}

func newTieredFixture(t *testing.T, remote *fakeRedis, cfg TieredConfig) tieredFixture {
	t.Helper()
	if remote == nil {
		remote = newFakeRedis()
	}
	reg := prometheus.NewRegistry()
	clock := &testClock{t: time.Unix(1_700_000_000, 0)}
	c, err := newTiered(NewMemory(MemoryConfig{}), remote, cfg, reg, nil, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return tieredFixture{cache: c, remote: remote, reg: reg, clock: clock}
}

// errorCount reads factgate_cache_errors_total{op} from reg.
func errorCount(t *testing.T, reg *prometheus.Registry, op string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range families {
		if family.GetName() != "factgate_cache_errors_total" {
			continue
		}
		for _, m := range family.GetMetric() {
			for _, label := range m.GetLabel() {
				if label.GetName() == "op" && label.GetValue() == op {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// noProbe is a probe interval that never fires within a test.
const noProbe = Duration(time.Hour)

// TestTieredServesMemoryWhenRedisFails runs every operation against a dead Redis:
// none fails, each serves what memory knows, and each error is counted by op.
func TestTieredServesMemoryWhenRedisFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name  string
		op    string
		seed  func(c *Tiered)
		call  func(c *Tiered) error
		check func(t *testing.T, c *Tiered)
	}{
		{
			name: "get falls back to memory",
			op:   "get",
			seed: func(c *Tiered) { _ = c.memory.Set(ctx, "trace:1", []byte("t"), 0) },
			call: func(c *Tiered) error {
				_ = c.memory.Delete(ctx, "trace:1") // force the Redis read
				_, _, err := c.Get(ctx, "trace:1")
				return err
			},
		},
		{
			name: "set lands in memory",
			op:   "set",
			call: func(c *Tiered) error { return c.Set(ctx, "facts:abc", []byte("index"), 0) },
			check: func(t *testing.T, c *Tiered) {
				if v, ok, _ := c.Get(ctx, "facts:abc"); !ok || string(v) != "index" {
					t.Errorf("Get after a failed Redis Set = %q, %v", v, ok)
				}
			},
		},
		{
			name: "set add lands in the mirror",
			op:   "set_add",
			call: func(c *Tiered) error { return c.SetAdd(ctx, "session:{s}:facts", "seg1", 0) },
			check: func(t *testing.T, c *Tiered) {
				if got, _ := c.SetMembers(ctx, "session:{s}:facts"); !slices.Equal(got, []string{"seg1"}) {
					t.Errorf("SetMembers = %q", got)
				}
			},
		},
		{
			name: "set members from the mirror",
			op:   "set_members",
			seed: func(c *Tiered) { _ = c.memory.SetAdd(ctx, "session:{s}:facts", "seg0", 0) },
			call: func(c *Tiered) error {
				got, err := c.SetMembers(ctx, "session:{s}:facts")
				if !slices.Equal(got, []string{"seg0"}) {
					return fmt.Errorf("mirror not served: got %q", got)
				}
				return err
			},
		},
		{
			name: "counters land in the mirror",
			op:   "hash_incr",
			call: func(c *Tiered) error { return c.HashIncr(ctx, "ab:r", map[string]int64{"a": 2}, 0) },
			check: func(t *testing.T, c *Tiered) {
				if got, _ := c.HashGetAll(ctx, "ab:r"); got["a"] != 2 {
					t.Errorf("HashGetAll = %v", got)
				}
			},
		},
		{
			name: "counters from the mirror",
			op:   "hash_get_all",
			call: func(c *Tiered) error { _, err := c.HashGetAll(ctx, "ab:r"); return err },
		},
		{
			name: "delete",
			op:   "delete",
			call: func(c *Tiered) error { return c.Delete(ctx, "facts:abc") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newTieredFixture(t, nil, TieredConfig{ProbeInterval: noProbe})
			if tt.seed != nil {
				tt.seed(fx.cache)
			}
			fx.remote.down.Store(true)
			if err := tt.call(fx.cache); err != nil {
				t.Fatalf("call failed while Redis is down: %v", err)
			}
			st := fx.cache.Status()
			if !st.Degraded || st.Backend != "memory+redis" || st.LastError == "" {
				t.Errorf("Status = %+v, want degraded with the error", st)
			}
			if got := errorCount(t, fx.reg, tt.op); got != 1 {
				t.Errorf("factgate_cache_errors_total{op=%q} = %v, want 1", tt.op, got)
			}
			if tt.check != nil {
				tt.check(t, fx.cache)
			}
		})
	}
}

func TestTieredBackoffSparesDeadRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newTieredFixture(t, nil, TieredConfig{ProbeInterval: noProbe, ErrorBackoff: Duration(time.Second)})
	fx.remote.down.Store(true)
	_, _, _ = fx.cache.Get(ctx, "k")
	if n := fx.remote.calls.Load(); n != 1 {
		t.Fatalf("first call reached Redis %d times", n)
	}
	for range 100 {
		_, _, _ = fx.cache.Get(ctx, "k")
		_ = fx.cache.Set(ctx, "k", []byte("v"), 0)
	}
	if n := fx.remote.calls.Load(); n != 1 {
		t.Fatalf("200 calls within the backoff reached Redis %d more times, want 0", n-1)
	}
	fx.clock.advance(1100 * time.Millisecond)
	for range 10 {
		_ = fx.cache.Delete(ctx, "other")
	}
	if n := fx.remote.calls.Load(); n != 2 {
		t.Fatalf("after the backoff, 10 calls reached Redis %d times, want exactly 1 trial", n-1)
	}
}

func TestTieredRecoversOnNextSuccessfulCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newTieredFixture(t, nil, TieredConfig{ProbeInterval: noProbe})
	fx.remote.down.Store(true)
	_ = fx.cache.Set(ctx, "k", []byte("v"), 0)
	fx.remote.down.Store(false)
	fx.clock.advance(2 * time.Second)
	_ = fx.cache.Set(ctx, "k", []byte("v"), 0)
	if st := fx.cache.Status(); st.Degraded || st.LastError != "" {
		t.Fatalf("Status = %+v after Redis answered", st)
	}
}

func TestTieredProbeRecovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newTieredFixture(t, nil, TieredConfig{ProbeInterval: Duration(5 * time.Millisecond)})
	fx.remote.down.Store(true)
	_ = fx.cache.Set(ctx, "k", []byte("v"), 0)
	if !fx.cache.Status().Degraded {
		t.Fatal("not degraded after a failure")
	}
	waitFor(t, "ping failures to be counted", func() bool { return errorCount(t, fx.reg, "ping") > 0 })
	fx.remote.down.Store(false)
	waitFor(t, "the probe to notice Redis is back", func() bool { return !fx.cache.Status().Degraded })
}

func TestTieredStartsDegradedWhenRedisWasDownAtStart(t *testing.T) {
	t.Parallel()
	remote := newFakeRedis()
	remote.down.Store(true)
	fx := newTieredFixture(t, remote, TieredConfig{ProbeInterval: Duration(5 * time.Millisecond)})
	if st := fx.cache.Status(); !st.Degraded || st.LastError == "" {
		t.Fatalf("Status = %+v; a Redis down at start must show", st)
	}
	remote.down.Store(false)
	waitFor(t, "recovery", func() bool { return !fx.cache.Status().Degraded })
}

func TestTieredCallerCancellationIsNotRedisFailure(t *testing.T) {
	t.Parallel()
	fx := newTieredFixture(t, nil, TieredConfig{ProbeInterval: noProbe})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fx.remote.down.Store(true) // whatever Redis says, the caller had already gone
	_, _, _ = fx.cache.Get(ctx, "k")
	if st := fx.cache.Status(); st.Degraded {
		t.Fatalf("a cancelled caller marked Redis degraded: %+v", st)
	}
}

// TestTieredReplicasAggregate runs two replicas on one shared store: values, set
// members and counters written by one are seen by the other.
func TestTieredReplicasAggregate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := newFakeRedis()
	a := newTieredFixture(t, shared, TieredConfig{ProbeInterval: noProbe}).cache
	b := newTieredFixture(t, shared, TieredConfig{ProbeInterval: noProbe}).cache

	_ = a.Set(ctx, "facts:abc", []byte("index"), 0)
	if v, ok, _ := b.Get(ctx, "facts:abc"); !ok || string(v) != "index" {
		t.Errorf("replica b reads %q, %v", v, ok)
	}
	_ = a.SetAdd(ctx, "session:{s}:facts", "seg1", 0)
	_ = b.SetAdd(ctx, "session:{s}:facts", "seg2", 0)
	for name, c := range map[string]*Tiered{"a": a, "b": b} {
		if got, _ := c.SetMembers(ctx, "session:{s}:facts"); !slices.Equal(got, []string{"seg1", "seg2"}) {
			t.Errorf("replica %s sees members %q", name, got)
		}
	}
	_ = a.HashIncr(ctx, "ab:r", map[string]int64{"a.requests": 1}, 0)
	_ = b.HashIncr(ctx, "ab:r", map[string]int64{"a.requests": 2, "b.requests": 1}, 0)
	if got, _ := a.HashGetAll(ctx, "ab:r"); got["a.requests"] != 3 || got["b.requests"] != 1 {
		t.Errorf("replica a sees counters %v", got)
	}
}

// TestTieredReplaysWritesAfterOutage: set members, counter deltas and deletes made
// while Redis was down reach it once it is back, so the replicas' aggregate is whole.
func TestTieredReplaysWritesAfterOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := newFakeRedis()
	fx := newTieredFixture(t, shared, TieredConfig{ProbeInterval: Duration(5 * time.Millisecond)})
	c := fx.cache
	_ = c.SetAdd(ctx, "session:{s}:facts", "seg1", 0)
	_ = c.HashIncr(ctx, "ab:r", map[string]int64{"a": 1}, 0)
	_ = c.Set(ctx, "trace:old", []byte("t"), 0)

	shared.down.Store(true)
	_ = c.SetAdd(ctx, "session:{s}:facts", "seg2", 0)
	_ = c.HashIncr(ctx, "ab:r", map[string]int64{"a": 2, "b": 5}, 0)
	_ = c.Delete(ctx, "trace:old")
	if got, _ := c.SetMembers(ctx, "session:{s}:facts"); !slices.Equal(got, []string{"seg1", "seg2"}) {
		t.Errorf("during the outage the mirror serves %q", got)
	}
	if got, _ := c.HashGetAll(ctx, "ab:r"); got["a"] != 3 || got["b"] != 5 {
		t.Errorf("during the outage the mirror serves %v", got)
	}

	shared.down.Store(false)
	waitFor(t, "recovery and replay", func() bool {
		members, _ := shared.store.SetMembers(ctx, "session:{s}:facts")
		counters, _ := shared.store.HashGetAll(ctx, "ab:r")
		_, traceLeft, _ := shared.store.Get(ctx, "trace:old")
		return slices.Equal(members, []string{"seg1", "seg2"}) && counters["a"] == 3 && counters["b"] == 5 && !traceLeft
	})
	// Reads after the replay count nothing twice.
	if got, _ := c.HashGetAll(ctx, "ab:r"); got["a"] != 3 || got["b"] != 5 {
		t.Errorf("after the replay the counters read %v", got)
	}
}

func TestTieredPendingWritesAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newTieredFixture(t, nil, TieredConfig{ProbeInterval: noProbe, MaxPendingWrites: 3})
	fx.remote.down.Store(true)
	for i := range 5 {
		if err := fx.cache.SetAdd(ctx, "s", "m"+strconv.Itoa(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := errorCount(t, fx.reg, "pending_dropped"); got != 2 {
		t.Fatalf("pending_dropped = %v, want 2 beyond a bound of 3", got)
	}
	if got, _ := fx.cache.SetMembers(ctx, "s"); len(got) != 5 {
		t.Errorf("the memory mirror holds %d members, want all 5", len(got))
	}
}

// TestPendingRequeueOrder covers the merge of a failed replay with writes made during
// it: a newer delete supersedes older members; an older delete stays before newer ones.
func TestPendingRequeueOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		older       func(p *pendingWrites)
		newer       func(p *pendingWrites)
		wantDelete  bool
		wantMembers []string
	}{
		{
			name:        "newer delete drops older members",
			older:       func(p *pendingWrites) { p.addMember("k", "a", 0, 10) },
			newer:       func(p *pendingWrites) { p.addDelete("k", 10); p.addMember("k", "b", 0, 10) },
			wantDelete:  true,
			wantMembers: []string{"b"},
		},
		{
			name:        "older delete is kept before newer members",
			older:       func(p *pendingWrites) { p.addDelete("k", 10) },
			newer:       func(p *pendingWrites) { p.addMember("k", "b", 0, 10) },
			wantDelete:  true,
			wantMembers: []string{"b"},
		},
		{
			name:        "members merge",
			older:       func(p *pendingWrites) { p.addMember("k", "a", 0, 10) },
			newer:       func(p *pendingWrites) { p.addMember("k", "b", 0, 10) },
			wantMembers: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			older, newer := newPendingWrites(), newPendingWrites()
			tt.older(older)
			tt.newer(newer)
			newer.requeue(older, 10)
			_, deleted := newer.deletes["k"]
			members, _ := newer.members("k")
			if deleted != tt.wantDelete || !slices.Equal(members, tt.wantMembers) {
				t.Fatalf("delete %v members %q; want %v %q", deleted, members, tt.wantDelete, tt.wantMembers)
			}
			if want := len(members) + map[bool]int{true: 1}[deleted]; newer.size != want {
				t.Errorf("size = %d, want %d", newer.size, want)
			}
		})
	}
}

func BenchmarkTieredGetMemoryHit(b *testing.B) {
	ctx := context.Background()
	c, err := newTiered(NewMemory(MemoryConfig{}), newFakeRedis(), TieredConfig{}, nil, nil, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "facts:" + strconv.Itoa(i) + ":0123456789abcdef0123456789abcdef"
		_ = c.Set(ctx, keys[i], make([]byte, 4096), 0)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok, _ := c.Get(ctx, keys[i&1023]); !ok {
			b.Fatal("miss")
		}
	}
}

// TestTieredIncrGetAllCountsAcrossReplicasAndFailsOpen: replicas counting against
// one limit each read the aggregate their increment made; while Redis is down each
// keeps counting from the last aggregate it saw plus its own increments, and those
// reach Redis once it is back.
func TestTieredIncrGetAllCountsAcrossReplicasAndFailsOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := newFakeRedis()
	a := newTieredFixture(t, shared, TieredConfig{ProbeInterval: Duration(5 * time.Millisecond)}).cache
	b := newTieredFixture(t, shared, TieredConfig{ProbeInterval: noProbe}).cache
	one := map[string]int64{"requests": 1}
	var seen []int64
	for _, c := range []*Tiered{a, b, a, b} {
		got, err := c.HashIncrGetAll(ctx, "ratelimit:{k}:1", one, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, got["requests"])
	}
	if !slices.Equal(seen, []int64{1, 2, 3, 4}) {
		t.Errorf("replicas alternating read %v, want 1 2 3 4", seen)
	}
	shared.down.Store(true)
	if got, err := a.HashIncrGetAll(ctx, "ratelimit:{k}:1", one, time.Minute); err != nil || got["requests"] != 4 {
		t.Errorf("during the outage replica a read %v, %v: want 4 (its last aggregate, 3, plus one)", got, err)
	}
	shared.down.Store(false)
	waitFor(t, "the outage's increment replayed", func() bool {
		counters, _ := shared.store.HashGetAll(ctx, "ratelimit:{k}:1")
		return counters["requests"] == 5
	})
}
