package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/configs/units"
)

// TieredConfig tunes how Tiered uses its memory tier and survives a failing Redis.
// Zero fields take the defaults.
type TieredConfig struct {
	// LocalTTL is how long a value read from Redis is kept in memory; a value changed
	// on another replica may be served stale for up to this long. Zero is 30s.
	LocalTTL units.Duration `yaml:"local_ttl"`
	// ProbeInterval is how often a degraded cache pings Redis to notice that it is
	// back. Zero is 2s.
	ProbeInterval units.Duration `yaml:"probe_interval"`
	// ErrorBackoff is how long calls skip Redis after it failed, serving memory only;
	// then one call tries Redis again. Zero is 1s.
	ErrorBackoff units.Duration `yaml:"error_backoff"`
	// MaxPendingWrites bounds the set members, counter fields, durable values and
	// deletes that did not reach Redis while it failed and are replayed when it is
	// back; beyond it they are dropped (and counted). Zero is 100000.
	MaxPendingWrites int `yaml:"max_pending_writes"`
	// MaxPendingBytes bounds what those writes hold in memory: keys, members, field
	// names and durable values (a session segment's encoded fact index), each with a
	// fixed overhead. It is part of the process's memory budget. Zero is 32MiB.
	MaxPendingBytes units.ByteSize `yaml:"max_pending_bytes"`
}

// Defaults of TieredConfig.
const (
	DefaultLocalTTL         = units.Duration(30 * time.Second)
	DefaultProbeInterval    = units.Duration(2 * time.Second)
	DefaultErrorBackoff     = units.Duration(time.Second)
	DefaultMaxPendingWrites = 100_000
	DefaultMaxPendingBytes  = units.ByteSize(32 << 20)
)

func (c TieredConfig) withDefaults() TieredConfig {
	if c.LocalTTL == 0 {
		c.LocalTTL = DefaultLocalTTL
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.ErrorBackoff == 0 {
		c.ErrorBackoff = DefaultErrorBackoff
	}
	if c.MaxPendingWrites == 0 {
		c.MaxPendingWrites = DefaultMaxPendingWrites
	}
	if c.MaxPendingBytes == 0 {
		c.MaxPendingBytes = DefaultMaxPendingBytes
	}
	return c
}

// limits returns the bounds of the pending writes.
func (c TieredConfig) limits() pendingLimits {
	return pendingLimits{writes: c.MaxPendingWrites, bytes: int64(c.MaxPendingBytes)}
}

// PendingBudget returns the bytes the pending writes may hold with these settings
// (MaxPendingBytes, defaults applied): part of the process's memory budget when a
// redis block is present.
func (c TieredConfig) PendingBudget() units.ByteSize { return c.withDefaults().MaxPendingBytes }

// Validate reports a negative bound.
func (c TieredConfig) Validate() error {
	if c.MaxPendingWrites < 0 {
		return fmt.Errorf("cache.tiered.max_pending_writes: %d is negative", c.MaxPendingWrites)
	}
	if c.MaxPendingBytes < 0 {
		return fmt.Errorf("cache.tiered.max_pending_bytes: %d is negative", c.MaxPendingBytes)
	}
	return nil
}

// remoteBackend is what Tiered needs from Redis; tests substitute a failing fake.
type remoteBackend interface {
	Cache
	Ping(ctx context.Context) error
	addMembers(ctx context.Context, key string, members []string, ttl time.Duration) error
	membersWithTTL(ctx context.Context, key string) ([]string, time.Duration, error)
	countersWithTTL(ctx context.Context, key string) (map[string]int64, time.Duration, error)
}

// Tiered is the Cache with memory in front of Redis. It fails open: a Redis error
// never fails a call — the call is served from memory, the error is counted in
// factgate_cache_errors_total{op}, and Status reports degraded with the error until
// Redis answers again (a background ping every ProbeInterval, or the next call that
// succeeds). While degraded, calls skip Redis for ErrorBackoff after each failure so
// a dead Redis is not hammered. With Redis Cluster a call reaches one master only:
// there only the probe's ping of every master ends the outage, so that a dead
// master's slots do not make the cache flap between healthy and degraded.
//
// SetMembers served from the memory mirror says so through SetMembersConfirmed.
//
// Values: Get reads memory first, then Redis, and keeps what Redis returned in memory
// for LocalTTL; Set writes both. Callers should key values by content or by unique id
// (fact index hashes, trace ids): a value overwritten on another replica may be
// served stale from memory until its local entry expires.
//
// Sets and counter hashes: Redis is the source of truth, so replicas aggregate;
// memory mirrors what was last read or written as the fallback. Set members, counter
// deltas, values written with SetDurable and deletes that did not reach Redis are
// kept (bounded by MaxPendingWrites and MaxPendingBytes) and replayed when Redis is
// back. A counter increment whose reply was lost in a timeout may have been
// applied; its replay then counts it twice — counters are statistics, not ledgers.
//
// Memory's errors (a key used as two kinds of thing) are returned as they are.
type Tiered struct {
	memory *Memory
	// view is set on a cache made by Separate: it shares its parent's Redis state
	// and closes only its own memory tier.
	view bool
	// owner numbers a view's durable values among the pending writes, and
	// pendingShare bounds what they may hold there (a quarter of
	// MaxPendingBytes), so that one kind of entry (traces) never crowds out the
	// values that cannot be rebuilt (session fact indexes). 0 for the cache
	// itself.
	owner        uint8
	pendingShare int64
	*tieredShared
}

// tieredShared is the Redis side of a Tiered — the backend, its health, the
// pending writes, the probe — shared by every memory tier put in front of it
// (Separate).
type tieredShared struct {
	remote remoteBackend
	// sharded is set when remote is a Redis Cluster: a call's success then ends no
	// outage, the probe's ping of every master does.
	sharded bool
	cfg     TieredConfig
	log     *slog.Logger
	metrics *tieredMetrics
	health  health
	// retryAt is when (UnixNano) a degraded cache lets one call try Redis again.
	retryAt atomic.Int64
	now     func() time.Time

	mu      sync.Mutex // guards the fields below
	pending *pendingWrites
	// inflight are the pending writes being replayed (nil when none); readers add
	// them like pending ones until they reach Redis.
	inflight *pendingWrites
	// onRecover are the functions OnRecover registered.
	onRecover []func(context.Context)
	// views counts the caches Separate made, to number them.
	views    uint8
	probing  bool
	flushing bool
	closed   bool
	done     chan struct{}
	wg       sync.WaitGroup
}

// NewTiered puts memory in front of remote. reg receives factgate_cache_errors_total
// and factgate_cache_degraded (nil: not registered; metrics already registered on reg
// are shared); a nil log discards. Zero fields of cfg take the defaults. When remote
// failed its start-up ping, the cache starts degraded and probing. Tiered owns both
// tiers: Close closes them.
func NewTiered(memory *Memory, remote *Redis, cfg TieredConfig, reg prometheus.Registerer, log *slog.Logger) (*Tiered, error) {
	if memory == nil || remote == nil {
		return nil, errors.New("cache: NewTiered needs a memory and a redis tier")
	}
	return newTiered(memory, remote, cfg, reg, log, time.Now)
}

// newTiered builds a Tiered reading the wall clock from now.
func newTiered(memory *Memory, remote remoteBackend, cfg TieredConfig, reg prometheus.Registerer, log *slog.Logger, now func() time.Time) (*Tiered, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	metrics, err := newTieredMetrics(reg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sharded, _ := remote.(interface{ sharded() bool })
	t := &Tiered{memory: memory, tieredShared: &tieredShared{
		remote:  remote,
		sharded: sharded != nil && sharded.sharded(),
		cfg:     cfg.withDefaults(),
		log:     log,
		metrics: metrics,
		now:     now,
		pending: newPendingWrites(),
		done:    make(chan struct{}),
	}}
	if st := remote.Status(); st.Degraded {
		t.failed(context.Background(), "ping", errors.New(st.LastError))
	}
	return t, nil
}

// Separate returns a cache that keeps its in-process entries in a memory tier of
// its own, bounded by cfg, in front of the same Redis as c: one kind of entry
// (traces) then never evicts another's (fact indexes, counters) from memory, while
// Redis, its health, backoff and pending writes stay shared. Its durable values
// may hold at most a quarter of MaxPendingBytes among the pending writes. For a Memory it is a
// new Memory; any other cache is returned as it is. The second result is the new
// memory tier (for its metrics; nil when c was returned). Closing the result drops
// its memory tier only.
func Separate(c Cache, cfg MemoryConfig) (Cache, *Memory) {
	switch c := c.(type) {
	case *Memory:
		m := NewMemory(cfg)
		return m, m
	case *Tiered:
		m := NewMemory(cfg)
		c.mu.Lock()
		c.views++
		owner := c.views
		c.mu.Unlock()
		return &Tiered{memory: m, view: true, owner: owner, pendingShare: int64(c.cfg.MaxPendingBytes) / 4, tieredShared: c.tieredShared}, m
	default:
		return c, nil
	}
}

// Get returns the value under key from memory, else from Redis (keeping it in memory
// for LocalTTL); a durable value still waiting to be replayed is found too. The
// slice is shared with the cache: do not modify it.
func (t *Tiered) Get(ctx context.Context, key string) ([]byte, bool, error) {
	value, ok, err := t.memory.Get(ctx, key)
	if err != nil || ok {
		return value, ok, err
	}
	t.mu.Lock()
	value, ok = t.pending.value(key)
	if !ok {
		value, ok = t.inflight.value(key)
	}
	t.mu.Unlock()
	if ok {
		return value, true, nil
	}
	if !t.useRemote() {
		return nil, false, nil
	}
	value, ok, err = t.remote.Get(ctx, key)
	if err != nil {
		t.failed(ctx, "get", err)
		return nil, false, nil
	}
	t.succeeded()
	if ok {
		_ = t.memory.Set(ctx, key, value, t.cfg.LocalTTL.Std())
	}
	return value, ok, nil
}

// GetConfirmed implements ValueConfirmer: it reads key from Redis whatever memory
// holds (a value read there stays in memory for LocalTTL, a key gone there is
// dropped from memory), so that a value another replica deleted is not served
// from memory while Redis answers. A delete of this process waiting to be
// replayed answers "absent", a durable value waiting to be replayed is returned
// over Redis's: both are newer than what Redis holds. While Redis fails it
// returns what memory (or a pending durable value) holds, unconfirmed.
func (t *Tiered) GetConfirmed(ctx context.Context, key string) ([]byte, bool, bool, error) {
	t.mu.Lock()
	gone := t.pending.deleted(key) || t.inflight.deleted(key)
	waiting, isWaiting := t.pending.value(key)
	if !isWaiting {
		waiting, isWaiting = t.inflight.value(key)
	}
	t.mu.Unlock()
	if gone {
		return nil, false, true, nil
	}
	if t.useRemote() {
		value, ok, err := t.remote.Get(ctx, key)
		if err == nil {
			t.succeeded()
			switch {
			case isWaiting:
				return waiting, true, true, nil
			case ok:
				_ = t.memory.Set(ctx, key, value, t.cfg.LocalTTL.Std())
			default:
				_ = t.memory.Delete(ctx, key)
			}
			return value, ok, true, nil
		}
		t.failed(ctx, "get", err)
	}
	value, ok, err := t.memory.Get(ctx, key)
	if err == nil && !ok && isWaiting {
		value, ok = waiting, true
	}
	return value, ok, false, err
}

// Set stores value in memory and in Redis for ttl (zero: the default TTL). While
// Redis fails the value lives in memory only: a lost cached value is rebuilt.
func (t *Tiered) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	t.set(ctx, key, value, ttl, false)
	return nil
}

// SetDurable stores value like Set and, when Redis cannot take it, keeps it with the
// pending writes (bounded by MaxPendingBytes) to write it when Redis is back: for
// values that cannot be rebuilt, such as the fact index of a session's segment.
func (t *Tiered) SetDurable(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	t.set(ctx, key, value, ttl, true)
	return nil
}

func (t *Tiered) set(ctx context.Context, key string, value []byte, ttl time.Duration, durable bool) {
	_ = t.memory.Set(ctx, key, value, ttl)
	if t.useRemote() {
		err := t.remote.Set(ctx, key, value, ttl)
		if err == nil {
			t.succeeded()
			// A newer value supersedes one waiting to be replayed.
			t.mu.Lock()
			t.pending.forgetValue(key)
			t.inflight.forgetValue(key)
			t.mu.Unlock()
			return
		}
		t.failed(ctx, "set", err)
	}
	if durable {
		t.keepPending(func(p *pendingWrites, limit pendingLimits) bool {
			return p.addValue(key, value, ttl, limit, t.owner, t.pendingShare)
		})
	}
}

// OnRecover registers fn to run, in the background, each time Redis answers again
// after it failed (it may have come back empty): the caller re-publishes what it
// holds that must not be lost. The context ends when the cache closes.
func (t *Tiered) OnRecover(fn func(ctx context.Context)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onRecover = append(t.onRecover, fn)
}

// Delete removes key from memory and Redis; while Redis fails, the delete is replayed
// when it is back.
func (t *Tiered) Delete(ctx context.Context, key string) error {
	_ = t.memory.Delete(ctx, key)
	if t.useRemote() {
		err := t.remote.Delete(ctx, key)
		if err == nil {
			t.succeeded()
			t.mu.Lock()
			t.pending.forget(key)
			t.inflight.forget(key)
			t.mu.Unlock()
			return nil
		}
		t.failed(ctx, "delete", err)
	}
	t.keepPending(func(p *pendingWrites, limit pendingLimits) bool { return p.addDelete(key, limit) })
	return nil
}

// SetAdd adds member to the set in Redis and in the memory mirror and resets the
// set's ttl; while Redis fails, the member is replayed when it is back.
func (t *Tiered) SetAdd(ctx context.Context, key, member string, ttl time.Duration) error {
	if err := t.memory.SetAdd(ctx, key, member, ttl); err != nil {
		return err
	}
	if t.useRemote() {
		err := t.remote.SetAdd(ctx, key, member, ttl)
		if err == nil {
			t.succeeded()
			return nil
		}
		t.failed(ctx, "set_add", err)
	}
	t.keepPending(func(p *pendingWrites, limit pendingLimits) bool { return p.addMember(key, member, ttl, limit) })
	return nil
}

// SetMembers returns the set's members from Redis (plus members still waiting to be
// replayed there), sorted, and mirrors them in memory; while Redis fails, the memory
// mirror's.
func (t *Tiered) SetMembers(ctx context.Context, key string) ([]string, error) {
	members, _, err := t.SetMembersConfirmed(ctx, key)
	return members, err
}

// SetMembersConfirmed is SetMembers that also reports whether Redis answered. When
// it did not (it failed, or is skipped while it fails), the members are the memory
// mirror's: what this process last read or added, which lacks what other replicas
// added since.
func (t *Tiered) SetMembersConfirmed(ctx context.Context, key string) ([]string, bool, error) {
	if t.useRemote() {
		members, ttl, err := t.remote.membersWithTTL(ctx, key)
		if err == nil {
			t.succeeded()
			t.mu.Lock()
			waiting, waitingTTL := t.pending.members(key)
			replaying, replayingTTL := t.inflight.members(key)
			t.mu.Unlock()
			waiting = unionSorted(waiting, replaying)
			waitingTTL = max(waitingTTL, replayingTTL)
			if len(waiting) > 0 {
				members = unionSorted(members, waiting)
				ttl = max(ttl, waitingTTL)
			}
			if len(members) == 0 {
				_ = t.memory.Delete(ctx, key)
				return nil, true, nil
			}
			t.memory.replaceSet(key, slices.Clone(members), ttl)
			return members, true, nil
		}
		t.failed(ctx, "set_members", err)
	}
	members, err := t.memory.SetMembers(ctx, key)
	return members, false, err
}

// HashIncr adds the deltas in Redis and in the memory mirror and resets the hash's
// ttl; while Redis fails, the deltas are replayed when it is back.
func (t *Tiered) HashIncr(ctx context.Context, key string, deltas map[string]int64, ttl time.Duration) error {
	if len(deltas) == 0 {
		return nil
	}
	if err := t.memory.HashIncr(ctx, key, deltas, ttl); err != nil {
		return err
	}
	if t.useRemote() {
		err := t.remote.HashIncr(ctx, key, deltas, ttl)
		if err == nil {
			t.succeeded()
			return nil
		}
		t.failed(ctx, "hash_incr", err)
	}
	t.keepPending(func(p *pendingWrites, limit pendingLimits) bool { return p.addDeltas(key, deltas, ttl, limit) })
	return nil
}

// HashGetAll returns the counters from Redis (plus deltas still waiting to be
// replayed there) and mirrors them in memory; while Redis fails, the memory mirror's:
// the last aggregate read plus this replica's increments since.
func (t *Tiered) HashGetAll(ctx context.Context, key string) (map[string]int64, error) {
	if t.useRemote() {
		counters, ttl, err := t.remote.countersWithTTL(ctx, key)
		if err == nil {
			t.succeeded()
			t.mu.Lock()
			waiting, waitingTTL := t.pending.deltas(key)
			replaying, replayingTTL := t.inflight.deltas(key)
			t.mu.Unlock()
			for field, delta := range waiting {
				counters[field] += delta
			}
			for field, delta := range replaying {
				counters[field] += delta
			}
			waitingTTL = max(waitingTTL, replayingTTL)
			if len(waiting)+len(replaying) > 0 {
				ttl = max(ttl, waitingTTL)
			}
			if len(counters) == 0 {
				_ = t.memory.Delete(ctx, key)
				return counters, nil
			}
			t.memory.replaceHash(key, maps.Clone(counters), ttl)
			return counters, nil
		}
		t.failed(ctx, "hash_get_all", err)
	}
	return t.memory.HashGetAll(ctx, key)
}

// HashIncrGetAll adds the deltas in Redis and returns the aggregate every replica
// counted (plus this replica's deltas still waiting to be replayed), mirrored in
// memory. While Redis fails it adds them in memory and returns the memory
// mirror's counters — the last aggregate read plus this replica's increments
// since — and replays the deltas when Redis is back.
func (t *Tiered) HashIncrGetAll(ctx context.Context, key string, deltas map[string]int64, ttl time.Duration) (map[string]int64, error) {
	local, err := t.memory.HashIncrGetAll(ctx, key, deltas, ttl)
	if err != nil {
		return nil, err
	}
	if t.useRemote() {
		counters, err := t.remote.HashIncrGetAll(ctx, key, deltas, ttl)
		if err == nil {
			t.succeeded()
			t.mu.Lock()
			waiting, _ := t.pending.deltas(key)
			replaying, _ := t.inflight.deltas(key)
			t.mu.Unlock()
			for field, delta := range waiting {
				counters[field] += delta
			}
			for field, delta := range replaying {
				counters[field] += delta
			}
			t.memory.replaceHash(key, maps.Clone(counters), ttl)
			return counters, nil
		}
		t.failed(ctx, "hash_incr", err)
	}
	if len(deltas) > 0 {
		t.keepPending(func(p *pendingWrites, limit pendingLimits) bool { return p.addDeltas(key, deltas, ttl, limit) })
	}
	return local, nil
}

// Status reports "memory+redis", degraded while Redis fails.
func (t *Tiered) Status() Status { return t.health.status("memory+redis") }

// Close stops the probe and any replay, then closes Redis and drops memory. A cache
// made by Separate drops its memory tier only.
func (t *Tiered) Close() error {
	if t.view {
		return t.memory.Close()
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.done)
	t.mu.Unlock()
	t.wg.Wait()
	err := t.remote.Close()
	_ = t.memory.Close()
	return err
}

// keepPending records a write that did not reach Redis, to replay it when Redis is
// back, or counts it dropped when the bound is reached. A write that missed a healthy
// Redis (its caller gave up mid-call) is replayed at once.
func (t *tieredShared) keepPending(record func(p *pendingWrites, limit pendingLimits) bool) {
	t.mu.Lock()
	kept := record(t.pending, t.cfg.limits())
	t.mu.Unlock()
	if !kept {
		t.metrics.errors.WithLabelValues("pending_dropped").Inc()
		return
	}
	if !t.health.degraded.Load() {
		t.startFlush()
	}
}

// useRemote reports whether a call should go to Redis: always while healthy; while
// degraded, only the one call that claims the retry slot after each backoff.
func (t *tieredShared) useRemote() bool {
	if !t.health.degraded.Load() {
		return true
	}
	at, now := t.retryAt.Load(), t.now().UnixNano()
	return now >= at && t.retryAt.CompareAndSwap(at, now+int64(t.cfg.ErrorBackoff))
}

// failed records a Redis error from op: counted, degraded, backoff, probe. An error
// caused by the caller's own cancelled or expired context says nothing about Redis;
// nor does a key holding the wrong kind of thing (counted and logged only).
func (t *tieredShared) failed(ctx context.Context, op string, err error) {
	if ctx.Err() != nil {
		return
	}
	t.metrics.errors.WithLabelValues(op).Inc()
	if isDataError(err) {
		t.log.Warn("redis holds something else under a cache key; serving from memory", "op", op, "error", err)
		return
	}
	t.retryAt.Store(t.now().Add(t.cfg.ErrorBackoff.Std()).UnixNano())
	if t.health.fail(err.Error()) {
		t.metrics.degraded.Set(1)
		t.log.Warn("redis failed; serving from memory until it answers", "op", op, "error", err)
	}
	t.startProbe()
}

// succeeded records that a Redis call worked: it ends an outage, except on a
// Cluster, where the call reached one master (recovered does).
func (t *tieredShared) succeeded() {
	if t.sharded && t.health.degraded.Load() {
		return
	}
	t.recovered()
}

// recovered clears degraded after Redis answered, replays pending writes and runs
// the OnRecover functions.
func (t *tieredShared) recovered() {
	if !t.health.succeed() {
		return
	}
	t.metrics.degraded.Set(0)
	t.log.Info("redis answers again; cache recovered")
	t.startFlush()
	t.startRecoverHooks()
}

// startRecoverHooks runs the OnRecover functions in the background, one after the
// other, with a context that ends when the cache closes.
func (t *tieredShared) startRecoverHooks() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || len(t.onRecover) == 0 {
		return
	}
	hooks := slices.Clone(t.onRecover)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-t.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		for _, fn := range hooks {
			fn(ctx)
		}
	}()
}

func (t *tieredShared) startProbe() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.probing || t.closed {
		return
	}
	t.probing = true
	t.wg.Add(1)
	go t.probe()
}

// probe pings Redis every ProbeInterval until it answers or the cache closes.
func (t *tieredShared) probe() {
	defer t.wg.Done()
	ticker := time.NewTicker(t.cfg.ProbeInterval.Std())
	defer ticker.Stop()
	for {
		if t.stopProbing() {
			return
		}
		select {
		case <-t.done:
			return
		case <-ticker.C:
		}
		if !t.health.degraded.Load() {
			continue // a call recovered it; stopProbing decides under the lock
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.cfg.ProbeInterval.Std())
		err := t.remote.Ping(ctx)
		if err != nil {
			t.failed(context.Background(), "ping", err)
		} else {
			t.recovered()
		}
		cancel()
	}
}

// stopProbing ends the probe once healthy. Checked under t.mu so that a failure
// racing with the probe's exit either sees probing set (and this probe keeps going,
// since degraded is set first) or starts a new probe.
func (t *tieredShared) stopProbing() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || !t.health.degraded.Load() {
		t.probing = false
		return true
	}
	return false
}

func (t *tieredShared) startFlush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.flushing || t.closed || t.pending.empty() {
		return
	}
	t.flushing = true
	t.wg.Add(1)
	go t.flush()
}

// flush replays the pending writes to Redis: deletes first, then set members and
// counter deltas (a delete recorded after an add has already discarded that add).
// What does not reach Redis goes back to the pending writes.
func (t *tieredShared) flush() {
	defer t.wg.Done()
	t.mu.Lock()
	batch := t.pending
	t.inflight, t.pending = batch, newPendingWrites()
	t.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-t.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := batch.replay(ctx, t.remote, &t.mu)

	t.mu.Lock()
	t.flushing, t.inflight = false, nil
	dropped := t.pending.requeue(batch, t.cfg.limits())
	more := !t.pending.empty()
	t.mu.Unlock()
	if dropped > 0 {
		t.metrics.errors.WithLabelValues("pending_dropped").Add(float64(dropped))
	}
	if err != nil {
		t.failed(ctx, "replay", err)
		return
	}
	t.log.Info("replayed the writes made while redis failed")
	if more {
		t.startFlush()
	}
}

// Flush implements Flusher: it replays the pending writes in the caller's
// goroutine (after a replay running in the background ended), trying again every
// ProbeInterval while Redis fails, until none is left or ctx ends; it returns
// what is left by key namespace, nil when nothing is.
func (t *tieredShared) Flush(ctx context.Context) map[string]int {
	for {
		done, err := t.flushOnce(ctx)
		switch {
		case done:
			return nil
		case ctx.Err() != nil:
			return t.unwritten()
		case err == nil:
			continue // writes made meanwhile: replay them too
		}
		wait := time.NewTimer(t.cfg.ProbeInterval.Std())
		select {
		case <-ctx.Done():
			wait.Stop()
			return t.unwritten()
		case <-wait.C:
		}
	}
}

// flushOnce replays the pending writes once; done reports that none is left.
func (t *tieredShared) flushOnce(ctx context.Context) (done bool, err error) {
	var batch *pendingWrites
	for batch == nil {
		t.mu.Lock()
		switch {
		case !t.flushing && t.pending.empty():
			t.mu.Unlock()
			return true, nil
		case !t.flushing:
			t.flushing = true
			batch = t.pending
			t.inflight, t.pending = batch, newPendingWrites()
		}
		t.mu.Unlock()
		if batch == nil {
			// A replay runs in the background: let it finish.
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	err = batch.replay(ctx, t.remote, &t.mu)
	t.mu.Lock()
	t.flushing, t.inflight = false, nil
	dropped := t.pending.requeue(batch, t.cfg.limits())
	done = t.pending.empty()
	t.mu.Unlock()
	if dropped > 0 {
		t.metrics.errors.WithLabelValues("pending_dropped").Add(float64(dropped))
	}
	if err != nil {
		t.failed(ctx, "replay", err)
		return false, err
	}
	t.succeeded()
	return done, nil
}

// unwritten counts the pending writes by key namespace; nil when none is.
func (t *tieredShared) unwritten() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending.empty() && t.inflight.empty() {
		return nil
	}
	out := map[string]int{}
	t.pending.byNamespace(out)
	t.inflight.byNamespace(out)
	return out
}

// tieredMetrics are the fallback's Prometheus metrics.
type tieredMetrics struct {
	errors   *prometheus.CounterVec
	degraded prometheus.Gauge
}

func newTieredMetrics(reg prometheus.Registerer) (*tieredMetrics, error) {
	errorsTotal, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "factgate_cache_errors_total",
		Help: "Redis errors the cache absorbed by serving from memory, by operation (get, set, delete, set_add, set_members, hash_incr, hash_get_all, ping, replay), and pending writes dropped (pending_dropped).",
	}, []string{"op"}))
	if err != nil {
		return nil, err
	}
	degraded, err := registerOrReuse(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "factgate_cache_degraded",
		Help: "1 while Redis fails and the cache serves from memory, else 0.",
	}))
	if err != nil {
		return nil, err
	}
	return &tieredMetrics{errors: errorsTotal, degraded: degraded}, nil
}

// registerOrReuse registers c on reg (nil: does nothing) or returns the collector
// already registered under the same description.
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("cache: registering metrics: %w", err)
	}
	return c, nil
}

func unionSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	slices.Sort(out)
	return slices.Compact(out)
}

var (
	_ Cache          = (*Tiered)(nil)
	_ Durable        = (*Tiered)(nil)
	_ Confirmer      = (*Tiered)(nil)
	_ ValueConfirmer = (*Tiered)(nil)
	_ Flusher        = (*Tiered)(nil)
)
