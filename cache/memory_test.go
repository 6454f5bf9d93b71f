package cache

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/factgate/factgate/configs/units"
)

func newTestMemory(cfg MemoryConfig) (*Memory, *fakeClock) {
	m := NewMemory(cfg)
	clock := &fakeClock{}
	clock.advance(time.Hour)
	m.lru.now = clock.now
	return m, clock
}

func TestMemoryRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name  string
		write func(m *Memory) error
		check func(t *testing.T, m *Memory)
	}{
		{
			name:  "value",
			write: func(m *Memory) error { return m.Set(ctx, "facts:abc", []byte("index"), 0) },
			check: func(t *testing.T, m *Memory) {
				got, ok, err := m.Get(ctx, "facts:abc")
				if err != nil || !ok || string(got) != "index" {
					t.Errorf("Get = %q, %v, %v", got, ok, err)
				}
			},
		},
		{
			name: "set members sorted without duplicates",
			write: func(m *Memory) error {
				for _, seg := range []string{"seg3", "seg1", "seg2", "seg1"} {
					if err := m.SetAdd(ctx, "session:{s1}:facts", seg, 0); err != nil {
						return err
					}
				}
				return nil
			},
			check: func(t *testing.T, m *Memory) {
				got, err := m.SetMembers(ctx, "session:{s1}:facts")
				if err != nil || !slices.Equal(got, []string{"seg1", "seg2", "seg3"}) {
					t.Errorf("SetMembers = %q, %v", got, err)
				}
			},
		},
		{
			name: "counters add up",
			write: func(m *Memory) error {
				if err := m.HashIncr(ctx, "ab:route:variants", map[string]int64{"a.requests": 1, "b.requests": 2}, 0); err != nil {
					return err
				}
				return m.HashIncr(ctx, "ab:route:variants", map[string]int64{"a.requests": 4, "a.contradictions": 1}, 0)
			},
			check: func(t *testing.T, m *Memory) {
				got, err := m.HashGetAll(ctx, "ab:route:variants")
				want := map[string]int64{"a.requests": 5, "b.requests": 2, "a.contradictions": 1}
				if err != nil || len(got) != len(want) {
					t.Fatalf("HashGetAll = %v, %v; want %v", got, err, want)
				}
				for f, n := range want {
					if got[f] != n {
						t.Errorf("%s = %d, want %d", f, got[f], n)
					}
				}
			},
		},
		{
			name: "absent keys are empty, not errors",
			write: func(m *Memory) error {
				return nil
			},
			check: func(t *testing.T, m *Memory) {
				if v, ok, err := m.Get(ctx, "nope"); ok || v != nil || err != nil {
					t.Errorf("Get = %q, %v, %v", v, ok, err)
				}
				if ms, err := m.SetMembers(ctx, "nope"); len(ms) != 0 || err != nil {
					t.Errorf("SetMembers = %q, %v", ms, err)
				}
				if h, err := m.HashGetAll(ctx, "nope"); len(h) != 0 || err != nil {
					t.Errorf("HashGetAll = %v, %v", h, err)
				}
			},
		},
		{
			name: "delete removes any kind",
			write: func(m *Memory) error {
				_ = m.SetAdd(ctx, "s", "x", 0)
				_ = m.Set(ctx, "v", []byte("x"), 0)
				_ = m.Delete(ctx, "s")
				return m.Delete(ctx, "v")
			},
			check: func(t *testing.T, m *Memory) {
				if m.Stats().Entries != 0 {
					t.Errorf("%d entries left after deleting all", m.Stats().Entries)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, _ := newTestMemory(MemoryConfig{})
			if err := tt.write(m); err != nil {
				t.Fatalf("write: %v", err)
			}
			tt.check(t, m)
		})
	}
}

func TestMemoryExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name  string
		write func(m *Memory)
		alive func(m *Memory) bool
	}{
		{
			name:  "value",
			write: func(m *Memory) { _ = m.Set(ctx, "k", []byte("v"), time.Minute) },
			alive: func(m *Memory) bool { _, ok, _ := m.Get(ctx, "k"); return ok },
		},
		{
			name:  "set",
			write: func(m *Memory) { _ = m.SetAdd(ctx, "k", "m", time.Minute) },
			alive: func(m *Memory) bool { ms, _ := m.SetMembers(ctx, "k"); return len(ms) > 0 },
		},
		{
			name:  "hash",
			write: func(m *Memory) { _ = m.HashIncr(ctx, "k", map[string]int64{"f": 1}, time.Minute) },
			alive: func(m *Memory) bool { h, _ := m.HashGetAll(ctx, "k"); return len(h) > 0 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, clock := newTestMemory(MemoryConfig{})
			tt.write(m)
			clock.advance(50 * time.Second)
			tt.write(m) // a write resets the ttl
			clock.advance(50 * time.Second)
			if !tt.alive(m) {
				t.Fatal("gone 50s after a write with a 1m ttl")
			}
			clock.advance(11 * time.Second)
			if tt.alive(m) {
				t.Fatal("still there 61s after the last write with a 1m ttl")
			}
		})
	}
}

func TestMemoryDefaultTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, clock := newTestMemory(MemoryConfig{DefaultTTL: units.Duration(10 * time.Second)})
	_ = m.Set(ctx, "k", []byte("v"), 0)
	clock.advance(11 * time.Second)
	if _, ok, _ := m.Get(ctx, "k"); ok {
		t.Fatal("a zero ttl did not take default_ttl 10s")
	}
}

// TestMemoryByteBound checks that the bound covers sets and hashes, not only values:
// a growing set pushes old values out.
func TestMemoryByteBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, _ := newTestMemory(MemoryConfig{MaxBytes: 8 << 10})
	for i := range 10 {
		_ = m.Set(ctx, "v"+strconv.Itoa(i), make([]byte, 300), 0)
	}
	for i := range 200 {
		if err := m.SetAdd(ctx, "session:{s}:facts", strings.Repeat("x", 20)+strconv.Itoa(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	s := m.Stats()
	if s.Bytes > 8<<10 {
		t.Fatalf("holds %d bytes, bound is %d", s.Bytes, 8<<10)
	}
	if s.Evictions == 0 {
		t.Fatal("a set growing past the bound evicted nothing")
	}
	if _, ok, _ := m.Get(ctx, "v0"); ok {
		t.Error("the oldest value survived a set that filled the bound")
	}
	members, _ := m.SetMembers(ctx, "session:{s}:facts")
	if len(members) != 200 {
		t.Errorf("the set being written has %d members, want 200", len(members))
	}
}

func TestMemoryOversizedValueIsForgotten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, _ := newTestMemory(MemoryConfig{MaxBytes: 1 << 10})
	_ = m.Set(ctx, "k", []byte("small"), 0)
	if err := m.Set(ctx, "k", make([]byte, 2<<10), 0); err != nil {
		t.Fatalf("an oversized value is a cache miss, not an error: %v", err)
	}
	if v, ok, _ := m.Get(ctx, "k"); ok {
		t.Fatalf("Get = %d bytes; the older value must not survive an oversized Set", len(v))
	}
}

func TestMemoryWrongKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name string
		call func(m *Memory) error
		want string
	}{
		{name: "SetAdd on a value", call: func(m *Memory) error { return m.SetAdd(ctx, "val", "x", 0) }, want: `key "val" holds a value, not a set`},
		{name: "HashIncr on a set", call: func(m *Memory) error { return m.HashIncr(ctx, "set", map[string]int64{"f": 1}, 0) }, want: `key "set" holds a set, not a counter hash`},
		{name: "Get on a hash", call: func(m *Memory) error { _, _, err := m.Get(ctx, "hash"); return err }, want: `key "hash" holds a counter hash, not a value`},
		{name: "SetMembers on a hash", call: func(m *Memory) error { _, err := m.SetMembers(ctx, "hash"); return err }, want: "holds a counter hash, not a set"},
		{name: "HashGetAll on a value", call: func(m *Memory) error { _, err := m.HashGetAll(ctx, "val"); return err }, want: "holds a value, not a counter hash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, _ := newTestMemory(MemoryConfig{})
			_ = m.Set(ctx, "val", []byte("v"), 0)
			_ = m.SetAdd(ctx, "set", "m", 0)
			_ = m.HashIncr(ctx, "hash", map[string]int64{"f": 1}, 0)
			err := tt.call(m)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestMemoryReadsAreSnapshots checks that what SetMembers and HashGetAll return
// belongs to the caller: changing it, or writing afterwards, does not alias.
func TestMemoryReadsAreSnapshots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, _ := newTestMemory(MemoryConfig{})
	_ = m.SetAdd(ctx, "s", "b", 0)
	members, _ := m.SetMembers(ctx, "s")
	_ = m.SetAdd(ctx, "s", "a", 0)
	members[0] = "changed"
	if got, _ := m.SetMembers(ctx, "s"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("set = %q after the caller changed its copy", got)
	}
	_ = m.HashIncr(ctx, "h", map[string]int64{"f": 1}, 0)
	counters, _ := m.HashGetAll(ctx, "h")
	counters["f"] = 100
	if got, _ := m.HashGetAll(ctx, "h"); got["f"] != 1 {
		t.Errorf("counter = %d after the caller changed its copy", got["f"])
	}
}

func BenchmarkMemoryGetHit(b *testing.B) {
	ctx := context.Background()
	m := NewMemory(MemoryConfig{})
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "facts:" + strconv.Itoa(i) + ":0123456789abcdef0123456789abcdef"
		_ = m.Set(ctx, keys[i], make([]byte, 4096), 0)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok, _ := m.Get(ctx, keys[i&1023]); !ok {
			b.Fatal("miss")
		}
	}
}

// TestMemoryChargesWhatAValueKeepsAlive: a value is charged its capacity (the
// array it keeps alive), its key and the per-entry overhead.
func TestMemoryChargesWhatAValueKeepsAlive(t *testing.T) {
	t.Parallel()
	m := NewMemory(MemoryConfig{})
	value := make([]byte, 10, 4096)
	_ = m.Set(context.Background(), "k", value, 0)
	if got, want := m.Stats().Bytes, int64(entryOverhead+1+4096); got != want {
		t.Errorf("a 10-byte value in a 4096-byte array is charged %d bytes, want %d", got, want)
	}
}
