package cache

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/factgate/factgate/configs/units"
)

// Memory is the in-process Cache: byte values, sets and counter hashes in one LRU,
// bounded by bytes and entries, each entry with its ttl (sets and hashes expire too).
// It is the default backend and the fallback of Tiered. It never fails except when a
// key is used as two kinds of thing (a value and a set), which is a caller's bug and
// is reported as an error, as Redis reports WRONGTYPE.
//
// Values are stored and returned without copying: the cache owns a value after Set,
// and the slice Get returns must not be modified. Sets and hashes are copied on write,
// so what SetMembers and HashGetAll return belongs to the caller.
type Memory struct {
	lru        *LRU[string, memoryItem]
	defaultTTL time.Duration
}

// MemoryConfig bounds the in-process cache. Zero fields take the defaults.
type MemoryConfig struct {
	// MaxBytes bounds what the cache holds: keys, values, set members and counter
	// fields, each with a fixed per-entry overhead. Zero is 16MiB.
	MaxBytes units.ByteSize `yaml:"max_bytes"`
	// MaxEntries bounds the number of keys. Zero is 100000.
	MaxEntries int `yaml:"max_entries"`
	// DefaultTTL is the lifetime of entries stored with a ttl of zero. Zero is 1h.
	DefaultTTL units.Duration `yaml:"default_ttl"`
}

// Defaults of MemoryConfig.
const (
	DefaultMemoryMaxBytes   units.ByteSize = 16 << 20
	DefaultMemoryMaxEntries                = 100_000
	DefaultTTL              units.Duration = units.Duration(time.Hour)
)

// withDefaults fills zero fields.
func (c MemoryConfig) withDefaults() MemoryConfig {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMemoryMaxBytes
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = DefaultMemoryMaxEntries
	}
	if c.DefaultTTL == 0 {
		c.DefaultTTL = DefaultTTL
	}
	return c
}

// Budget returns the bytes the memory tier may hold with these settings
// (MaxBytes, defaults applied): part of the process's memory budget.
func (c MemoryConfig) Budget() units.ByteSize { return c.withDefaults().MaxBytes }

// Validate reports a negative bound.
func (c MemoryConfig) Validate() error {
	if c.MaxBytes < 0 {
		return fmt.Errorf("cache.memory.max_bytes: %d is negative", c.MaxBytes)
	}
	if c.MaxEntries < 0 {
		return fmt.Errorf("cache.memory.max_entries: %d is negative", c.MaxEntries)
	}
	return nil
}

// itemKind says what a memoryItem holds.
type itemKind uint8

const (
	kindValue itemKind = iota
	kindSet
	kindHash
)

func (k itemKind) String() string {
	switch k {
	case kindSet:
		return "a set"
	case kindHash:
		return "a counter hash"
	default:
		return "a value"
	}
}

// memoryItem is one key's content. It is immutable once stored: writers build a new
// one (copy on write), so readers need no lock beyond the LRU's.
type memoryItem struct {
	kind  itemKind
	value []byte
	// members is sorted and free of duplicates.
	members  []string
	counters map[string]int64
	// bytes is the content's cost against MaxBytes, without the key.
	bytes int64
}

// Approximate heap costs beyond the raw bytes, measured on Go 1.26 amd64: the LRU
// list node with the item header (128-byte size class), the map slot and the
// key's string header per key; a string header per set member; a map slot per
// counter.
const (
	entryOverhead   = 192
	memberOverhead  = 16
	counterOverhead = 32
)

// NewMemory makes an empty in-process cache; zero fields of cfg take the defaults.
func NewMemory(cfg MemoryConfig) *Memory {
	cfg = cfg.withDefaults()
	return &Memory{
		defaultTTL: cfg.DefaultTTL.Std(),
		lru: NewLRU(LRUOptions[string, memoryItem]{
			MaxBytes:   int64(cfg.MaxBytes),
			MaxEntries: cfg.MaxEntries,
			DefaultTTL: cfg.DefaultTTL.Std(),
			Size: func(key string, item memoryItem) int64 {
				return entryOverhead + int64(len(key)) + item.bytes
			},
		}),
	}
}

// Get returns the value under key. The slice is shared with the cache: do not modify it.
func (m *Memory) Get(_ context.Context, key string) ([]byte, bool, error) {
	item, ok := m.lru.Get(key)
	if !ok {
		return nil, false, nil
	}
	if item.kind != kindValue {
		return nil, false, wrongKind(key, item.kind, kindValue)
	}
	return item.value, true, nil
}

// Set stores value under key for ttl (zero or negative: the default TTL). A value larger than the
// byte bound is not stored (and any older value under key is dropped); that is not an
// error, since a cache may always forget.
func (m *Memory) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	// The capacity, not the length, is what the slice keeps alive.
	m.lru.Put(key, memoryItem{kind: kindValue, value: value, bytes: int64(cap(value))}, cacheTTL(ttl))
	return nil
}

// Delete removes key, whatever it holds.
func (m *Memory) Delete(_ context.Context, key string) error {
	m.lru.Delete(key)
	return nil
}

// SetAdd adds member to the set under key and resets the set's ttl.
func (m *Memory) SetAdd(_ context.Context, key, member string, ttl time.Duration) error {
	return m.addMembers(key, []string{member}, ttl)
}

// addMembers adds members to the set under key (creating it) and resets its ttl.
func (m *Memory) addMembers(key string, members []string, ttl time.Duration) error {
	_, err := m.lru.Update(key, cacheTTL(ttl), func(old memoryItem, found bool) (memoryItem, error) {
		if found && old.kind != kindSet {
			return memoryItem{}, wrongKind(key, old.kind, kindSet)
		}
		merged := old.members
		copied := false
		for _, member := range members {
			i, present := slices.BinarySearch(merged, member)
			if present {
				continue
			}
			if !copied {
				merged = slices.Clone(merged)
				copied = true
			}
			merged = slices.Insert(merged, i, member)
		}
		if !copied && found {
			return old, nil // nothing new; only the ttl is reset
		}
		return setItem(merged), nil
	})
	return err
}

// replaceSet stores members (sorted, no duplicates) as the set under key.
func (m *Memory) replaceSet(key string, members []string, ttl time.Duration) {
	m.lru.Put(key, setItem(members), cacheTTL(ttl))
}

func setItem(members []string) memoryItem {
	var size int64
	for _, member := range members {
		size += memberOverhead + int64(len(member))
	}
	return memoryItem{kind: kindSet, members: members, bytes: size}
}

// SetMembers returns the set's members, sorted; an absent set has none.
func (m *Memory) SetMembers(_ context.Context, key string) ([]string, error) {
	item, ok := m.lru.Get(key)
	if !ok {
		return nil, nil
	}
	if item.kind != kindSet {
		return nil, wrongKind(key, item.kind, kindSet)
	}
	return slices.Clone(item.members), nil
}

// HashIncr adds each delta to its counter under key and resets the hash's ttl. No
// deltas change nothing.
func (m *Memory) HashIncr(_ context.Context, key string, deltas map[string]int64, ttl time.Duration) error {
	if len(deltas) == 0 {
		return nil
	}
	_, err := m.lru.Update(key, cacheTTL(ttl), func(old memoryItem, found bool) (memoryItem, error) {
		if found && old.kind != kindHash {
			return memoryItem{}, wrongKind(key, old.kind, kindHash)
		}
		counters := make(map[string]int64, len(old.counters)+len(deltas))
		maps.Copy(counters, old.counters)
		for field, delta := range deltas {
			counters[field] += delta
		}
		return hashItem(counters), nil
	})
	return err
}

// HashIncrGetAll adds each delta to its counter under key, resets the hash's ttl
// and returns a copy of every counter, in one step under the cache's lock.
func (m *Memory) HashIncrGetAll(_ context.Context, key string, deltas map[string]int64, ttl time.Duration) (map[string]int64, error) {
	var out map[string]int64
	_, err := m.lru.Update(key, cacheTTL(ttl), func(old memoryItem, found bool) (memoryItem, error) {
		if found && old.kind != kindHash {
			return memoryItem{}, wrongKind(key, old.kind, kindHash)
		}
		counters := make(map[string]int64, len(old.counters)+len(deltas))
		maps.Copy(counters, old.counters)
		for field, delta := range deltas {
			counters[field] += delta
		}
		out = maps.Clone(counters)
		return hashItem(counters), nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// replaceHash stores counters as the hash under key; the cache owns counters.
func (m *Memory) replaceHash(key string, counters map[string]int64, ttl time.Duration) {
	m.lru.Put(key, hashItem(counters), cacheTTL(ttl))
}

func hashItem(counters map[string]int64) memoryItem {
	var size int64
	for field := range counters {
		size += counterOverhead + int64(len(field))
	}
	return memoryItem{kind: kindHash, counters: counters, bytes: size}
}

// HashGetAll returns a copy of every counter under key; an absent hash has none.
func (m *Memory) HashGetAll(_ context.Context, key string) (map[string]int64, error) {
	item, ok := m.lru.Get(key)
	if !ok {
		return map[string]int64{}, nil
	}
	if item.kind != kindHash {
		return nil, wrongKind(key, item.kind, kindHash)
	}
	return maps.Clone(item.counters), nil
}

// Stats returns the underlying LRU's size and counters.
func (m *Memory) Stats() LRUStats { return m.lru.Stats() }

// Status reports the memory backend, which is never degraded.
func (m *Memory) Status() Status { return Status{Backend: "memory"} }

// Close drops every entry.
func (m *Memory) Close() error {
	m.lru.Purge()
	return nil
}

// cacheTTL maps a Cache ttl to the LRU's: zero or negative is the default TTL (the
// LRU would keep a negative one forever).
func cacheTTL(ttl time.Duration) time.Duration { return max(ttl, 0) }

func wrongKind(key string, have, want itemKind) error {
	return fmt.Errorf("cache: key %q holds %s, not %s", key, have, want)
}

var _ Cache = (*Memory)(nil)
