package bufpool

import (
	"runtime"
	"testing"
)

// TestSizeClasses: Get rounds a size up to its class, a power of two from 4 KiB
// to MaxSize, and returns nil beyond it.
func TestSizeClasses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ n, want int }{
		{0, 4096}, {1, 4096}, {4095, 4096}, {4096, 4096}, {4097, 8192}, {50_000, 64 << 10}, {MaxSize, MaxSize},
	} {
		p := Get(tc.n)
		if p == nil || len(*p) != 0 || cap(*p) != tc.want {
			t.Fatalf("Get(%d) = %v, want an empty buffer of %d bytes", tc.n, p, tc.want)
		}
		Put(p)
	}
	if p := Get(MaxSize + 1); p != nil {
		t.Fatalf("Get(MaxSize+1) = a buffer of %d bytes, want nil", cap(*p))
	}
}

// TestPutEmptiesAndPoisons: a buffer comes back empty, and in a race-enabled
// build filled with PoisonByte, so that a read after Put fails at once.
func TestPutEmptiesAndPoisons(t *testing.T) {
	t.Parallel()
	p := Get(10)
	*p = append(*p, "client body"...)
	b := *p
	Put(p)
	if len(*p) != 0 {
		t.Errorf("Put left %d bytes", len(*p))
	}
	if Poisons && b[0] != PoisonByte {
		t.Errorf("a race-enabled build did not poison the returned buffer: %q", b)
	}
}

// TestKeptWithinTheBound: a returned buffer is handed to the next Get of its
// size class — it survives garbage collections, unlike a sync.Pool's — and the
// free buffers of all classes never take more than their shared bound.
func TestKeptWithinTheBound(t *testing.T) {
	const n = MaxSize // the largest class: no other test keeps it
	l := &classes[sizeClass(n)]
	ps := make([]*[]byte, 2*maxFreeBytes/n)
	for i := range ps {
		ps[i] = Get(n)
	}
	first := ps[0]
	for _, p := range ps {
		Put(p)
	}
	l.mu.Lock()
	kept := len(l.free)
	l.mu.Unlock()
	if kept == 0 || kept > maxFreeBytes/n {
		t.Fatalf("%d free buffers of %d bytes kept of %d returned, want 1 to %d", kept, n, len(ps), maxFreeBytes/n)
	}
	if fb := freeBytes.Load(); fb > maxFreeBytes {
		t.Fatalf("%d bytes of free buffers, beyond the bound of %d", fb, maxFreeBytes)
	}
	runtime.GC()
	runtime.GC()
	p := Get(n)
	if cap(*p) != cap(*first) {
		t.Fatalf("buffer of %d bytes", cap(*p))
	}
	l.mu.Lock()
	after := len(l.free)
	l.mu.Unlock()
	if after != kept-1 {
		t.Errorf("after two collections and one Get, %d free buffers, want %d: the buffer was not reused", after, kept-1)
	}
	Put(p)
	// Empty the class again: the other tests share the bound.
	l.mu.Lock()
	for _, p := range l.free {
		freeBytes.Add(-int64(cap(*p)))
	}
	l.free = nil
	l.mu.Unlock()
}

// TestOneClassMayUseTheSharedBound: the requests of one workload — 50 in flight
// on a validating route, each with an injected body of the 64 KiB class — get
// their buffers back from the free list, not from the allocator: one class may
// keep more than an equal share of the bound.
func TestOneClassMayUseTheSharedBound(t *testing.T) {
	const n, inFlight = 64 << 10, 50
	l := &classes[sizeClass(n)]
	ps := make([]*[]byte, inFlight)
	for i := range ps {
		ps[i] = Get(n)
	}
	l.mu.Lock()
	before := len(l.free)
	l.mu.Unlock()
	for _, p := range ps {
		Put(p)
	}
	l.mu.Lock()
	kept := len(l.free) - before
	l.mu.Unlock()
	if kept < inFlight-4 { // other tests' free buffers may share the bound
		t.Fatalf("%d of %d returned 64 KiB buffers kept for the next requests", kept, inFlight)
	}
}
