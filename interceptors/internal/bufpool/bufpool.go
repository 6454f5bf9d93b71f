// Package bufpool keeps the free byte buffers of an exchange's bodies — the
// injected request, the answer as edited — between requests, by size class,
// within one bound on the memory they take together. The interceptors package
// lends them through Exchange.Buffer and returns them at Release; nothing else
// should need it.
package bufpool

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// The bodies an exchange holds are tens of kilobytes each on a route that
// injects knowledge. Allocating them per request makes most of the proxy's
// garbage; instead they come from here and go back once the proxy is done with
// the exchange.

// Buffers are pooled by size class: powers of two from 1<<minShift to MaxSize,
// so that a request's small buffer never stands in for a large one. A request
// carrying megabytes of log gets its own buffer, which the garbage collector
// takes back.
const (
	minShift = 12 // 4 KiB
	maxShift = 20 // 1 MiB
	// MaxSize is the largest buffer kept: Get returns nil beyond it.
	MaxSize = 1 << maxShift
)

// classes are free lists rather than sync.Pools: a sync.Pool is emptied by
// every other garbage collection, and a proxy whose heap is small collects often,
// so the buffers would be allocated again and again. The classes share one bound:
// all free buffers together take at most maxFreeBytes (8 MiB, within the runtime
// allowance of the memory budget), a class at most maxFreeBuffers of them; beyond
// that a returned buffer is left to the garbage collector. The bound is shared
// because the requests of one workload fill one or two classes: 50 requests in
// flight on a validating route hold about 50 injected bodies of the 64 KiB class,
// and a bound per class (1 MiB: 16 of them) sent most of them to the collector.
var classes [maxShift - minShift + 1]List

const (
	maxFreeBytes   = 8 << 20
	maxFreeBuffers = 256
)

// freeBytes is the capacity of all free buffers of all classes.
var freeBytes atomic.Int64

// List is a list of free buffers: one size class's, or a caller's own (the
// trace encoder's scratch buffers). Its zero value is empty and ready; it is safe
// for concurrent use.
type List struct {
	mu   sync.Mutex
	free []*[]byte
}

// Get takes a free buffer, or returns nil.
func (l *List) Get() *[]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.free)
	if n == 0 {
		return nil
	}
	p := l.free[n-1]
	l.free[n-1] = nil
	l.free = l.free[:n-1]
	return p
}

// PutUpTo keeps p when the list holds fewer than limit buffers, and reports
// whether it did.
func (l *List) PutUpTo(p *[]byte, limit int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) >= limit {
		return false
	}
	l.free = append(l.free, p)
	return true
}

// Get returns an empty buffer with room for at least n bytes — a free one of
// n's size class, or a new one of the class's size — for the caller to Put back
// when nothing reads it any more. It returns nil when n is beyond MaxSize: the
// caller then allocates a buffer of its own, which is not pooled.
func Get(n int) *[]byte {
	c := sizeClass(n)
	if c < 0 {
		return nil
	}
	if p := classes[c].Get(); p != nil {
		freeBytes.Add(-int64(cap(*p)))
		return p
	}
	b := make([]byte, 0, classSize(c))
	return &b
}

// Put returns a buffer from Get, keeping it for the next request of its class
// when the shared bound allows it. Nothing may read or write it afterwards: in
// race-enabled builds Put fills it with PoisonByte first (Poisons).
func Put(p *[]byte) {
	if Poisons {
		b := (*p)[:cap(*p)]
		for i := range b {
			b[i] = PoisonByte
		}
	}
	*p = (*p)[:0]
	c := sizeClass(cap(*p))
	if c < 0 {
		return
	}
	n := int64(cap(*p))
	if freeBytes.Add(n) > maxFreeBytes || !classes[c].PutUpTo(p, maxFreeBuffers) {
		freeBytes.Add(-n)
	}
}

// PoisonByte fills a returned buffer in a race-enabled build (Poisons), so that
// a read after Put sees garbage — an invalid JSON byte — at once, rather than
// only when the pool hands the buffer to another request.
const PoisonByte = 0xFF

// sizeClass returns the class index for a buffer of n bytes (rounded up), or -1
// when n is beyond the largest class.
func sizeClass(n int) int {
	if n > MaxSize {
		return -1
	}
	c := bits.Len(uint(max(n, 1)-1)) - minShift
	return max(c, 0)
}

// classSize is the capacity of the buffers of class c.
func classSize(c int) int { return 1 << (c + minShift) }
