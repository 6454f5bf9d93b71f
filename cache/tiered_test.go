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

	"github.com/factgate/factgate/configs/units"
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
const noProbe = units.Duration(time.Hour)

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
	fx := newTieredFixture(t, nil, TieredConfig{ProbeInterval: noProbe, ErrorBackoff: units.Duration(time.Second)})
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
	fx := newTieredFixture(t, nil, TieredConfig{ProbeInterval: units.Duration(5 * time.Millisecond)})
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
	fx := newTieredFixture(t, remote, TieredConfig{ProbeInterval: units.Duration(5 * time.Millisecond)})
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
	fx := newTieredFixture(t, shared, TieredConfig{ProbeInterval: units.Duration(5 * time.Millisecond)})
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

// testLimits bound pending writes in the unit tests: ten writes, plenty of bytes.
var testLimits = pendingLimits{writes: 10, bytes: 1 << 20}

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
			older:       func(p *pendingWrites) { p.addMember("k", "a", 0, testLimits) },
			newer:       func(p *pendingWrites) { p.addDelete("k", testLimits); p.addMember("k", "b", 0, testLimits) },
			wantDelete:  true,
			wantMembers: []string{"b"},
		},
		{
			name:        "older delete is kept before newer members",
			older:       func(p *pendingWrites) { p.addDelete("k", testLimits) },
			newer:       func(p *pendingWrites) { p.addMember("k", "b", 0, testLimits) },
			wantDelete:  true,
			wantMembers: []string{"b"},
		},
		{
			name:        "members merge",
			older:       func(p *pendingWrites) { p.addMember("k", "a", 0, testLimits) },
			newer:       func(p *pendingWrites) { p.addMember("k", "b", 0, testLimits) },
			wantMembers: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			older, newer := newPendingWrites(), newPendingWrites()
			tt.older(older)
			tt.newer(newer)
			newer.requeue(older, testLimits)
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

// TestTieredReplaysDurableValues: a value written with SetDurable while Redis is
// down is kept and written once Redis is back (a plain Set is not); while it
// waits, Get finds it even when the memory tier has dropped it; the OnRecover
// functions run after the recovery.
func TestTieredReplaysDurableValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := newFakeRedis()
	fx := newTieredFixture(t, shared, TieredConfig{ProbeInterval: units.Duration(5 * time.Millisecond)})
	c := fx.cache
	var recovered atomic.Int64
	c.OnRecover(func(context.Context) { recovered.Add(1) })

	shared.down.Store(true)
	_ = c.SetDurable(ctx, "facts:seg", []byte("index"), time.Minute)
	_ = c.Set(ctx, "trace:t", []byte("trace"), time.Minute)
	_ = c.memory.Delete(ctx, "facts:seg") // evicted from memory meanwhile
	if v, ok, _ := c.Get(ctx, "facts:seg"); !ok || string(v) != "index" {
		t.Errorf("Get of a durable value waiting for Redis = %q, %v", v, ok)
	}
	if recovered.Load() != 0 {
		t.Fatal("OnRecover ran before Redis came back")
	}

	shared.down.Store(false)
	waitFor(t, "the durable value to be replayed", func() bool {
		v, ok, _ := shared.store.Get(ctx, "facts:seg")
		return ok && string(v) == "index"
	})
	waitFor(t, "OnRecover to run", func() bool { return recovered.Load() == 1 })
	if _, ok, _ := shared.store.Get(ctx, "trace:t"); ok {
		t.Error("a plain Set made while Redis was down was replayed; only durable values are")
	}
	c.mu.Lock()
	left := c.pending.size
	if c.inflight != nil {
		left += c.inflight.size
	}
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("%d pending writes left after the replay", left)
	}
}

// TestTieredPendingBytesAreBounded: durable values beyond max_pending_bytes are
// dropped and counted; those within it are replayed.
func TestTieredPendingBytesAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newTieredFixture(t, nil, TieredConfig{ProbeInterval: noProbe, MaxPendingBytes: 4096})
	fx.remote.down.Store(true)
	for i := range 5 {
		_ = fx.cache.SetDurable(ctx, "facts:"+strconv.Itoa(i), make([]byte, 1500), 0)
	}
	if got := errorCount(t, fx.reg, "pending_dropped"); got != 3 {
		t.Errorf("pending_dropped = %v, want 3 of 5 values of 1500 bytes beyond a bound of 4096", got)
	}
	fx.cache.mu.Lock()
	bytes, size := fx.cache.pending.bytes, fx.cache.pending.size
	fx.cache.mu.Unlock()
	if size != 2 || bytes > 4096 || bytes < 3000 {
		t.Errorf("pending holds %d writes of %d bytes, want 2 within 4096", size, bytes)
	}
}

// TestSeparateKeepsItsOwnMemory: a cache made by Separate evicts only its own
// entries, shares Redis (its writes reach it, its failures degrade both), and
// closing it leaves the parent working.
func TestSeparateKeepsItsOwnMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newTieredFixture(t, nil, TieredConfig{ProbeInterval: noProbe})
	view, mem := Separate(fx.cache, MemoryConfig{MaxBytes: 4096})
	if mem == nil {
		t.Fatal("Separate of a Tiered made no memory tier")
	}
	_ = fx.cache.Set(ctx, "facts:keep", []byte("index"), 0)
	for i := range 20 {
		_ = view.Set(ctx, "trace:"+strconv.Itoa(i), make([]byte, 1000), 0)
	}
	if _, ok, _ := fx.cache.memory.Get(ctx, "facts:keep"); !ok {
		t.Error("the view's writes evicted the parent's entry from memory")
	}
	if s := mem.Stats(); s.Bytes > 4096 || s.Evictions == 0 {
		t.Errorf("the view's memory: %+v, want evictions within 4096 bytes", s)
	}
	if _, ok, _ := fx.remote.store.Get(ctx, "trace:19"); !ok {
		t.Error("the view's write did not reach Redis")
	}
	fx.remote.down.Store(true)
	_ = view.Set(ctx, "trace:x", []byte("t"), 0)
	if !fx.cache.Status().Degraded {
		t.Error("a Redis failure seen by the view did not degrade the parent")
	}
	fx.remote.down.Store(false)
	if err := view.Close(); err != nil {
		t.Fatal(err)
	}
	fx.clock.advance(2 * time.Second)
	if err := fx.cache.Set(ctx, "after", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := fx.remote.store.Get(ctx, "after"); !ok {
		t.Error("closing the view closed the parent's Redis")
	}
	if m, ok := Separate(NewMemory(MemoryConfig{}), MemoryConfig{MaxBytes: 1024}); ok == nil || m == nil {
		t.Error("Separate of a Memory made no memory")
	}
}

// clusterFake stands in for a Redis Cluster with one master dead: calls reach one
// master each and succeed or fail with fakeRedis's switch, while Ping, which asks
// every master, fails as long as masterDown is set.
type clusterFake struct {
	*fakeRedis
	masterDown atomic.Bool
}

func (f *clusterFake) sharded() bool { return true }

func (f *clusterFake) Ping(ctx context.Context) error {
	if f.masterDown.Load() {
		return errFakeDown
	}
	return f.fakeRedis.Ping(ctx)
}

// TestTieredOnAClusterOnlyThePingEndsAnOutage: with a master of the cluster dead,
// calls to the live masters succeed; they must not end the outage (the cache
// would flap between healthy and degraded, replaying and re-running the recovery
// hooks at each flip). The probe's ping of every master ends it.
func TestTieredOnAClusterOnlyThePingEndsAnOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := &clusterFake{fakeRedis: newFakeRedis()}
	clock := &testClock{t: time.Unix(1_700_000_000, 0)}
	c, err := newTiered(NewMemory(MemoryConfig{}), remote, TieredConfig{ProbeInterval: units.Duration(5 * time.Millisecond)}, prometheus.NewRegistry(), nil, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var recoveries atomic.Int64
	c.OnRecover(func(context.Context) { recoveries.Add(1) })

	remote.masterDown.Store(true)
	remote.down.Store(true) // this call's master is the dead one
	_ = c.SetAdd(ctx, "session:{s}:facts", "seg1", 0)
	remote.down.Store(false) // the next calls' masters live
	for reached := 0; reached < 5; {
		clock.advance(2 * time.Second) // past the error backoff: the call tries Redis
		before := remote.calls.Load()
		if err := c.Set(ctx, "facts:k", []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
		if remote.calls.Load() == before {
			continue // a probe's failed ping restarted the backoff first
		}
		reached++
		if st := c.Status(); !st.Degraded {
			t.Fatalf("a call to a live master ended the outage: %+v", st)
		}
	}
	if n := recoveries.Load(); n != 0 {
		t.Fatalf("the recovery hooks ran %d times with a master dead", n)
	}
	remote.masterDown.Store(false)
	waitFor(t, "the probe to see every master answer", func() bool { return !c.Status().Degraded })
	waitFor(t, "the pending member to be replayed", func() bool {
		got, _ := remote.store.SetMembers(ctx, "session:{s}:facts")
		return slices.Equal(got, []string{"seg1"})
	})
	waitFor(t, "the recovery hooks", func() bool { return recoveries.Load() == 1 })
}

// TestTieredSetMembersConfirmed: members read from Redis are confirmed; the
// memory mirror served while Redis fails is not.
func TestTieredSetMembersConfirmed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newTieredFixture(t, nil, TieredConfig{ProbeInterval: noProbe})
	_ = fx.remote.store.SetAdd(ctx, "session:{s}:facts", "other-replica", 0)
	_ = fx.cache.SetAdd(ctx, "session:{s}:facts", "mine", 0)
	got, confirmed, err := SetMembersConfirmed(ctx, fx.cache, "session:{s}:facts")
	if err != nil || !confirmed || !slices.Equal(got, []string{"mine", "other-replica"}) {
		t.Fatalf("healthy: %q, confirmed %v, %v", got, confirmed, err)
	}
	fx.remote.down.Store(true)
	_ = fx.remote.store.SetAdd(ctx, "session:{s}:facts", "added-meanwhile", 0)
	got, confirmed, err = SetMembersConfirmed(ctx, fx.cache, "session:{s}:facts")
	if err != nil || confirmed || !slices.Equal(got, []string{"mine", "other-replica"}) {
		t.Fatalf("Redis down: %q, confirmed %v, %v; want the mirror, unconfirmed", got, confirmed, err)
	}
	got, confirmed, _ = SetMembersConfirmed(ctx, fx.cache, "session:{s}:facts") // within the backoff: memory
	if confirmed {
		t.Fatalf("skipping Redis in the backoff: %q confirmed", got)
	}

	m := NewMemory(MemoryConfig{})
	_ = m.SetAdd(ctx, "k", "a", 0)
	if got, confirmed, err := SetMembersConfirmed(ctx, m, "k"); err != nil || !confirmed || !slices.Equal(got, []string{"a"}) {
		t.Fatalf("memory only: %q, confirmed %v, %v; want confirmed (one replica's whole truth)", got, confirmed, err)
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
	a := newTieredFixture(t, shared, TieredConfig{ProbeInterval: units.Duration(5 * time.Millisecond)}).cache
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
