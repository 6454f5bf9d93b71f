package cache

import (
	"sync"
	"time"
)

// NoExpiry is a ttl for LRU.Put and LRU.Update that keeps the entry until it is
// evicted or deleted, whatever the LRU's default TTL.
const NoExpiry time.Duration = -1

// LRUOptions bounds an LRU. A bound of zero is no bound; at least one bound should
// be set, or the LRU grows without limit.
type LRUOptions[K comparable, V any] struct {
	// MaxBytes bounds the sum of Size over all entries; zero is no byte bound. An
	// entry larger than MaxBytes on its own is not stored.
	MaxBytes int64
	// MaxEntries bounds the number of entries; zero is no count bound.
	MaxEntries int
	// Size reports what an entry costs against MaxBytes; it is called once per Put
	// or Update, under the LRU's lock, so it must be quick and must not call the LRU.
	// Nil counts every entry as one byte.
	Size func(key K, value V) int64
	// DefaultTTL is the lifetime of an entry stored with a ttl of zero; zero means
	// such entries never expire.
	DefaultTTL time.Duration
}

// LRUStats is a snapshot of an LRU's size and counters since it was made.
type LRUStats struct {
	// Entries is the number of entries held, expired ones not yet noticed included.
	Entries int
	// Bytes is the sum of Size over the entries held.
	Bytes int64
	// Hits and Misses count Get calls; a Get of an expired entry is a miss.
	Hits, Misses uint64
	// Evictions counts entries removed to respect MaxBytes or MaxEntries.
	Evictions uint64
	// Expirations counts expired entries removed when a Get or Update found them.
	Expirations uint64
}

// LRU is an in-process least-recently-used cache with a per-entry TTL, bounded by
// bytes and by entry count. Get, Put, Update and Delete are O(1) (plus what Size and
// an Update function cost); a Get hit does not allocate. Expiry is checked when an
// entry is read: an expired entry costs its bytes until it is read, evicted or
// overwritten, and since nobody reads it, it drifts to the eviction end of the list.
//
// An LRU is safe for concurrent use. Values are handed out as stored: a V that is a
// pointer, slice or map must be treated as immutable once it is in the cache. The
// zero LRU is not usable; make one with NewLRU.
type LRU[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]*lruEntry[K, V]
	// list is the sentinel of a circular doubly linked list: list.next is the most
	// recently used entry, list.prev the least.
	list  lruEntry[K, V]
	bytes int64
	stats LRUStats
	opts  LRUOptions[K, V]
	// now reads the monotonic clock as an offset from epoch; tests replace it.
	now   func() time.Duration
	epoch time.Time
}

type lruEntry[K comparable, V any] struct {
	key   K
	value V
	size  int64
	// expires is the monotonic offset after which the entry is gone; zero is never.
	expires    time.Duration
	prev, next *lruEntry[K, V]
}

// NewLRU makes an empty LRU with the given bounds.
func NewLRU[K comparable, V any](opts LRUOptions[K, V]) *LRU[K, V] {
	c := &LRU[K, V]{entries: make(map[K]*lruEntry[K, V]), opts: opts, epoch: time.Now()}
	c.list.next, c.list.prev = &c.list, &c.list
	c.now = func() time.Duration { return time.Since(c.epoch) }
	return c
}

// Get returns the value under key and whether it was there and unexpired, and marks
// it most recently used.
func (c *LRU[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		c.stats.Misses++
		c.mu.Unlock()
		var zero V
		return zero, false
	}
	if e.expires != 0 && c.now() >= e.expires {
		c.remove(e)
		c.stats.Expirations++
		c.stats.Misses++
		c.mu.Unlock()
		var zero V
		return zero, false
	}
	c.moveToFront(e)
	c.stats.Hits++
	v := e.value
	c.mu.Unlock()
	return v, true
}

// Put stores value under key for ttl (zero: the default TTL; NoExpiry or any
// negative ttl: never expires), marks it most recently used and evicts least
// recently used entries until the bounds hold. It reports false, and drops any
// older value under key, when the entry alone is larger than MaxBytes.
func (c *LRU[K, V]) Put(key K, value V, ttl time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.put(key, value, ttl)
}

// Update replaces the value under key with what fn returns, atomically: fn gets the
// current value (found is false when the key is absent or expired) and runs under the
// LRU's lock, so it must be quick, must not call the LRU, and must not modify old in
// place (readers may hold it). When fn returns an error nothing changes and Update
// returns that error. Otherwise the new value is stored as Put stores it (ttl as in
// Put; stored is Put's result, false when the entry alone exceeds MaxBytes).
func (c *LRU[K, V]) Update(key K, ttl time.Duration, fn func(old V, found bool) (V, error)) (stored bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old V
	e, found := c.entries[key]
	if found && e.expires != 0 && c.now() >= e.expires {
		c.remove(e)
		c.stats.Expirations++
		found = false
	}
	if found {
		old = e.value
	}
	value, err := fn(old, found)
	if err != nil {
		return false, err
	}
	return c.put(key, value, ttl), nil
}

// Delete removes key and reports whether it was there (expired or not).
func (c *LRU[K, V]) Delete(key K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if ok {
		c.remove(e)
	}
	return ok
}

// Len returns the number of entries held, expired ones not yet noticed included.
func (c *LRU[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Stats returns the LRU's size and counters.
func (c *LRU[K, V]) Stats() LRUStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries = len(c.entries)
	s.Bytes = c.bytes
	return s
}

// Range calls fn with each unexpired entry, most recently used first, until fn
// returns false. It works on a snapshot taken under the lock, so fn may call the
// LRU (and sees entries as they were); entries are not marked used.
func (c *LRU[K, V]) Range(fn func(key K, value V) bool) {
	type kv struct {
		key   K
		value V
	}
	c.mu.Lock()
	now := c.now()
	snapshot := make([]kv, 0, len(c.entries))
	for e := c.list.next; e != &c.list; e = e.next {
		if e.expires == 0 || now < e.expires {
			snapshot = append(snapshot, kv{e.key, e.value})
		}
	}
	c.mu.Unlock()
	for _, e := range snapshot {
		if !fn(e.key, e.value) {
			return
		}
	}
}

// Purge removes every entry; the counters are kept.
func (c *LRU[K, V]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	c.list.next, c.list.prev = &c.list, &c.list
	c.bytes = 0
}

// put stores an entry; c.mu is held.
func (c *LRU[K, V]) put(key K, value V, ttl time.Duration) bool {
	size := int64(1)
	if c.opts.Size != nil {
		size = c.opts.Size(key, value)
	}
	e, exists := c.entries[key]
	if c.opts.MaxBytes > 0 && size > c.opts.MaxBytes {
		if exists {
			c.remove(e)
		}
		return false
	}
	if ttl == 0 {
		ttl = c.opts.DefaultTTL
	}
	var expires time.Duration
	if ttl > 0 {
		expires = c.now() + ttl
	}
	if exists {
		c.bytes += size - e.size
		e.value, e.size, e.expires = value, size, expires
		c.moveToFront(e)
	} else {
		e = &lruEntry[K, V]{key: key, value: value, size: size, expires: expires}
		c.entries[key] = e
		c.bytes += size
		c.pushFront(e)
	}
	for c.overBounds() {
		victim := c.list.prev
		if victim == e {
			break // cannot happen: e alone fits both bounds
		}
		c.remove(victim)
		c.stats.Evictions++
	}
	return true
}

func (c *LRU[K, V]) overBounds() bool {
	return (c.opts.MaxBytes > 0 && c.bytes > c.opts.MaxBytes) ||
		(c.opts.MaxEntries > 0 && len(c.entries) > c.opts.MaxEntries)
}

func (c *LRU[K, V]) remove(e *lruEntry[K, V]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	delete(c.entries, e.key)
	c.bytes -= e.size
}

func (c *LRU[K, V]) pushFront(e *lruEntry[K, V]) {
	e.prev, e.next = &c.list, c.list.next
	c.list.next.prev = e
	c.list.next = e
}

func (c *LRU[K, V]) moveToFront(e *lruEntry[K, V]) {
	if c.list.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	c.pushFront(e)
}
