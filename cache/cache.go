// Package cache remembers what factgate computed: fact indexes, session segment
// lists, traces and A/B counters. One interface, two implementations — an embedded
// in-memory LRU (the default, nothing to install) and Redis through go-redis
// UniversalClient — and a tiered cache that puts the memory LRU in front of Redis
// and falls back to memory when Redis fails. A cache error never fails a request.
package cache

import (
	"context"
	"time"
)

// Cache stores byte values, sets and counters under string keys. Every method takes
// a context; a ttl of zero (or negative) means the implementation's default TTL.
//
// Keys are given without the backend's prefix; the Redis implementation adds its
// versioned prefix. Keys that must share a Redis Cluster slot (one session's keys)
// carry the same hash tag: see HashTag.
type Cache interface {
	// Get returns the value under key and whether it exists. The slice may be shared
	// with the cache: callers must not modify it.
	Get(ctx context.Context, key string) ([]byte, bool, error)
	// Set stores value under key for ttl. The cache owns value after the call.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Delete removes key.
	Delete(ctx context.Context, key string) error

	// SetAdd adds member to the set under key and (re)sets the set's ttl.
	SetAdd(ctx context.Context, key, member string, ttl time.Duration) error
	// SetMembers returns the set's members, sorted.
	SetMembers(ctx context.Context, key string) ([]string, error)

	// HashIncr adds each delta to its field of the counter hash under key and
	// (re)sets its ttl.
	HashIncr(ctx context.Context, key string, deltas map[string]int64, ttl time.Duration) error
	// HashGetAll returns every counter of the hash under key.
	HashGetAll(ctx context.Context, key string) (map[string]int64, error)
	// HashIncrGetAll is HashIncr and HashGetAll in one atomic step: it returns
	// every counter of the hash after the deltas were added, so that replicas
	// counting against one limit each see the others' increments (rate limits).
	HashIncrGetAll(ctx context.Context, key string, deltas map[string]int64, ttl time.Duration) (map[string]int64, error)

	// Status reports the backend's health for /readyz.
	Status() Status
	// Close releases the backend's resources.
	Close() error
}

// Durable is implemented by a cache whose shared tier can fail and come back empty
// (Tiered, in front of Redis). Its callers keep what cannot be rebuilt — a session
// segment's fact index, whose text is in no later request — through an outage.
type Durable interface {
	// SetDurable stores value like Set and, when the shared tier cannot take it,
	// keeps it (within the pending-write bounds) to write it when the tier is back.
	SetDurable(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// OnRecover registers fn to run in the background each time the shared tier
	// answers again after it failed, which may have lost what it held: fn
	// re-publishes what the caller holds in memory. Its ctx ends when the cache
	// closes.
	OnRecover(fn func(ctx context.Context))
}

// SetDurable stores value with c's SetDurable when c is Durable, else with Set
// (a cache without a shared tier has no outage to survive).
func SetDurable(ctx context.Context, c Cache, key string, value []byte, ttl time.Duration) error {
	if d, ok := c.(Durable); ok {
		return d.SetDurable(ctx, key, value, ttl)
	}
	return c.Set(ctx, key, value, ttl)
}

// Confirmer is implemented by a cache that mirrors a shared tier's sets in memory
// (Tiered): while the shared tier fails it serves the mirror, which lacks the
// members other replicas added since it was last read.
type Confirmer interface {
	// SetMembersConfirmed is SetMembers that also reports whether the shared tier
	// answered (confirmed): false means the members are this process's mirror.
	SetMembersConfirmed(ctx context.Context, key string) (members []string, confirmed bool, err error)
}

// ValueConfirmer is implemented by a cache that keeps values read from a shared
// tier in memory (Tiered), where a value another replica deleted or replaced
// lives on until its local ttl ends.
type ValueConfirmer interface {
	// GetConfirmed is Get that asks the shared tier first, whatever memory holds,
	// so that a value another replica deleted or replaced is never served from
	// memory while the shared tier answers; confirmed reports that it did. A
	// delete or durable value of this process still waiting to be replayed wins
	// over what the shared tier holds. The slice must not be modified.
	GetConfirmed(ctx context.Context, key string) (value []byte, ok, confirmed bool, err error)
}

// GetConfirmed reads key from the shared tier first when c is a ValueConfirmer
// (see ValueConfirmer.GetConfirmed); any other cache is one replica's whole
// truth, and confirmed when Get did not fail.
func GetConfirmed(ctx context.Context, c Cache, key string) (value []byte, ok, confirmed bool, err error) {
	if cf, is := c.(ValueConfirmer); is {
		return cf.GetConfirmed(ctx, key)
	}
	value, ok, err = c.Get(ctx, key)
	return value, ok, err == nil, err
}

// Flusher is implemented by a cache that keeps the writes its shared tier could
// not take, to replay them when it answers again (Tiered). At shutdown the
// process flushes them rather than lose them silently.
type Flusher interface {
	// Flush writes the pending writes to the shared tier now, trying again every
	// probe interval while it fails, until none is left or ctx ends. It returns
	// how many writes are still unwritten by the namespace of their key (the part
	// before its first ':': "trace", "experiment", "facts"); nil when none is.
	Flush(ctx context.Context) map[string]int
}

// SetMembersConfirmed returns the set's members and whether they are every
// replica's as far as c can tell: a Confirmer says so itself; any other cache is
// confirmed when SetMembers did not fail (a memory-only cache is one replica's
// whole truth).
func SetMembersConfirmed(ctx context.Context, c Cache, key string) ([]string, bool, error) {
	if cf, ok := c.(Confirmer); ok {
		return cf.SetMembersConfirmed(ctx, key)
	}
	members, err := c.SetMembers(ctx, key)
	return members, err == nil, err
}

// Status is a cache's health as /readyz reports it.
type Status struct {
	// Backend is "memory", "redis" or "memory+redis".
	Backend string `json:"backend"`
	// Degraded is set while the shared backend fails and the memory fallback serves.
	Degraded bool `json:"degraded"`
	// LastError is the latest backend error while degraded.
	LastError string `json:"last_error,omitempty"`
}

// HashTag wraps id as a Redis Cluster hash tag ("{id}") so that every key built with
// it lands on one slot: "session:" + HashTag(sid) + ":facts".
func HashTag(id string) string { return "{" + id + "}" }
