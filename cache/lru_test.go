package cache

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock drives an LRU's expiry by hand.
type fakeClock struct{ offset atomic.Int64 }

func (c *fakeClock) now() time.Duration      { return time.Duration(c.offset.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func newTestLRU(opts LRUOptions[string, string]) (*LRU[string, string], *fakeClock) {
	c := NewLRU(opts)
	clock := &fakeClock{}
	clock.advance(time.Hour) // a non-zero start, like a real process
	c.now = clock.now
	return c, clock
}

func byteLen(_ string, v string) int64 { return int64(len(v)) }

func TestLRUExpiry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		defaultTTL time.Duration
		ttl        time.Duration
		wait       time.Duration
		wantHit    bool
	}{
		{name: "alive before its ttl", ttl: time.Minute, wait: 59 * time.Second, wantHit: true},
		{name: "gone at its ttl", ttl: time.Minute, wait: time.Minute},
		{name: "zero ttl takes the default", defaultTTL: time.Second, wait: 2 * time.Second},
		{name: "zero ttl without default never expires", wait: 1000 * time.Hour, wantHit: true},
		{name: "NoExpiry outlives the default", defaultTTL: time.Second, ttl: NoExpiry, wait: time.Hour, wantHit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, clock := newTestLRU(LRUOptions[string, string]{MaxEntries: 10, DefaultTTL: tt.defaultTTL})
			c.Put("index", "facts", tt.ttl)
			clock.advance(tt.wait)
			got, ok := c.Get("index")
			if ok != tt.wantHit || (ok && got != "facts") {
				t.Fatalf("Get after %v = %q, %v; want hit %v", tt.wait, got, ok, tt.wantHit)
			}
			s := c.Stats()
			if !tt.wantHit && (s.Expirations != 1 || s.Entries != 0 || s.Misses != 1) {
				t.Errorf("expired entry not removed and counted: %+v", s)
			}
		})
	}
}

func TestLRUBounds(t *testing.T) {
	t.Parallel()
	type step struct {
		op    string // "put" or "get"
		key   string
		value string
	}
	tests := []struct {
		name          string
		opts          LRUOptions[string, string]
		steps         []step
		wantKeys      []string
		wantGone      []string
		wantEvictions uint64
		wantBytes     int64
	}{
		{
			name:          "byte bound evicts the least recently used",
			opts:          LRUOptions[string, string]{MaxBytes: 10, Size: byteLen},
			steps:         []step{{"put", "a", "xxxx"}, {"put", "b", "xxxx"}, {"put", "c", "xxxx"}},
			wantKeys:      []string{"b", "c"},
			wantGone:      []string{"a"},
			wantEvictions: 1,
			wantBytes:     8,
		},
		{
			name:          "a read keeps an entry",
			opts:          LRUOptions[string, string]{MaxBytes: 10, Size: byteLen},
			steps:         []step{{"put", "a", "xxxx"}, {"put", "b", "xxxx"}, {"get", "a", ""}, {"put", "c", "xxxx"}},
			wantKeys:      []string{"a", "c"},
			wantGone:      []string{"b"},
			wantEvictions: 1,
			wantBytes:     8,
		},
		{
			name:          "one big entry evicts several",
			opts:          LRUOptions[string, string]{MaxBytes: 10, Size: byteLen},
			steps:         []step{{"put", "a", "xxx"}, {"put", "b", "xxx"}, {"put", "c", "xxx"}, {"put", "d", "xxxxxxxx"}},
			wantKeys:      []string{"d"},
			wantGone:      []string{"a", "b", "c"},
			wantEvictions: 3,
			wantBytes:     8,
		},
		{
			name:      "an entry larger than the bound is refused and drops the old value",
			opts:      LRUOptions[string, string]{MaxBytes: 10, Size: byteLen},
			steps:     []step{{"put", "a", "xx"}, {"put", "b", "xx"}, {"put", "a", "xxxxxxxxxxxx"}},
			wantKeys:  []string{"b"},
			wantGone:  []string{"a"},
			wantBytes: 2,
		},
		{
			name:          "overwrite re-accounts the size",
			opts:          LRUOptions[string, string]{MaxBytes: 10, Size: byteLen},
			steps:         []step{{"put", "a", "xxxxxxxx"}, {"put", "a", "x"}, {"put", "b", "xxxxxxxx"}},
			wantKeys:      []string{"a", "b"},
			wantEvictions: 0,
			wantBytes:     9,
		},
		{
			name:          "entry count bound",
			opts:          LRUOptions[string, string]{MaxEntries: 2},
			steps:         []step{{"put", "a", "1"}, {"put", "b", "2"}, {"put", "c", "3"}},
			wantKeys:      []string{"b", "c"},
			wantGone:      []string{"a"},
			wantEvictions: 1,
			wantBytes:     2, // nil Size counts each entry as one byte
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := newTestLRU(tt.opts)
			for _, s := range tt.steps {
				if s.op == "put" {
					c.Put(s.key, s.value, 0)
				} else {
					c.Get(s.key)
				}
			}
			stats := c.Stats()
			for _, k := range tt.wantKeys {
				if _, ok := c.Get(k); !ok {
					t.Errorf("%q was evicted, want it kept", k)
				}
			}
			for _, k := range tt.wantGone {
				if v, ok := c.Get(k); ok {
					t.Errorf("%q = %q is still there, want it evicted", k, v)
				}
			}
			if stats.Evictions != tt.wantEvictions || stats.Bytes != tt.wantBytes || stats.Entries != len(tt.wantKeys) {
				t.Errorf("stats %+v; want %d evictions, %d bytes, %d entries", stats, tt.wantEvictions, tt.wantBytes, len(tt.wantKeys))
			}
		})
	}
}

func TestLRUUpdate(t *testing.T) {
	t.Parallel()
	errRefused := errors.New("refused")
	tests := []struct {
		name      string
		seed      bool
		fn        func(old string, found bool) (string, error)
		wantErr   error
		wantValue string
		wantFound bool
	}{
		{
			name:      "creates when absent",
			fn:        func(old string, found bool) (string, error) { return fmt.Sprint(found), nil },
			wantValue: "false", wantFound: true,
		},
		{
			name:      "sees the current value",
			seed:      true,
			fn:        func(old string, found bool) (string, error) { return old + "+1", nil },
			wantValue: "v+1", wantFound: true,
		},
		{
			name:      "an error changes nothing",
			seed:      true,
			fn:        func(string, bool) (string, error) { return "lost", errRefused },
			wantErr:   errRefused,
			wantValue: "v", wantFound: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := newTestLRU(LRUOptions[string, string]{MaxEntries: 4})
			if tt.seed {
				c.Put("k", "v", 0)
			}
			_, err := c.Update("k", 0, tt.fn)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Update error = %v, want %v", err, tt.wantErr)
			}
			got, ok := c.Get("k")
			if got != tt.wantValue || ok != tt.wantFound {
				t.Errorf("after Update: %q, %v; want %q, %v", got, ok, tt.wantValue, tt.wantFound)
			}
		})
	}
}

func TestLRUUpdateIsAtomic(t *testing.T) {
	t.Parallel()
	c := NewLRU(LRUOptions[string, int]{MaxEntries: 4})
	const workers, increments = 8, 500
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range increments {
				_, _ = c.Update("count", 0, func(old int, _ bool) (int, error) { return old + 1, nil })
			}
		})
	}
	wg.Wait()
	if got, _ := c.Get("count"); got != workers*increments {
		t.Fatalf("count = %d after %d concurrent increments", got, workers*increments)
	}
}

// TestLRUConcurrent mixes every operation from several goroutines; run with -race.
// The bounds must hold at the end whatever the interleaving.
func TestLRUConcurrent(t *testing.T) {
	t.Parallel()
	c := NewLRU(LRUOptions[string, string]{MaxBytes: 1000, MaxEntries: 50, Size: byteLen, DefaultTTL: time.Millisecond})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				key := strconv.Itoa((i * (w + 1)) % 80)
				switch i % 5 {
				case 0, 1:
					c.Put(key, "value-"+key, 0)
				case 2:
					if v, ok := c.Get(key); ok && v != "value-"+key {
						t.Errorf("Get(%q) = %q", key, v)
					}
				case 3:
					c.Delete(key)
				case 4:
					_, _ = c.Update(key, NoExpiry, func(string, bool) (string, error) { return "value-" + key, nil })
				}
			}
		})
	}
	wg.Wait()
	s := c.Stats()
	if s.Entries > 50 || s.Bytes > 1000 || s.Entries != c.Len() {
		t.Fatalf("bounds broken after concurrent use: %+v", s)
	}
	var sum int64
	for e := c.list.next; e != &c.list; e = e.next {
		sum += e.size
	}
	if sum != s.Bytes {
		t.Fatalf("list holds %d bytes, accounting says %d", sum, s.Bytes)
	}
}

func BenchmarkLRUGetHit(b *testing.B) {
	c := NewLRU(LRUOptions[string, *[64]byte]{MaxEntries: 10_000, DefaultTTL: time.Hour})
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "facts:" + strconv.Itoa(i) + ":0123456789abcdef0123456789abcdef"
		c.Put(keys[i], new([64]byte), 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, ok := c.Get(keys[i&1023]); !ok {
			b.Fatal("miss")
		}
	}
}

func BenchmarkLRUGetHitParallel(b *testing.B) {
	c := NewLRU(LRUOptions[string, *[64]byte]{MaxEntries: 10_000, DefaultTTL: time.Hour})
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "facts:" + strconv.Itoa(i)
		c.Put(keys[i], new([64]byte), 0)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c.Get(keys[i&1023])
			i++
		}
	})
}

func BenchmarkLRUPutEvict(b *testing.B) {
	c := NewLRU(LRUOptions[string, int]{MaxEntries: 512})
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Put(keys[i&4095], i, 0)
	}
}

func TestLRURange(t *testing.T) {
	t.Parallel()
	c := NewLRU(LRUOptions[string, int]{MaxEntries: 10})
	now := time.Duration(0)
	c.now = func() time.Duration { return now }
	c.Put("a", 1, 0)
	c.Put("b", 2, time.Second)
	c.Put("c", 3, 0)
	now = 2 * time.Second // b expired
	var got []string
	c.Range(func(k string, v int) bool {
		got = append(got, k)
		c.Put("d", 4, 0) // fn may call the LRU
		return true
	})
	if strings.Join(got, ",") != "c,a" {
		t.Errorf("Range visited %v, want c,a (most recent first, expired skipped)", got)
	}
	got = got[:0]
	c.Range(func(k string, _ int) bool { got = append(got, k); return false })
	if len(got) != 1 {
		t.Errorf("Range went on after fn returned false: %v", got)
	}
}
