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
