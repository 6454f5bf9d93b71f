package interceptors

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// The bodies an exchange holds — the injected request, the answer as edited —
// are tens of kilobytes each on a route that injects knowledge. Allocating them
// per request makes most of the proxy's garbage; instead they come from a pool
// and go back once the proxy is done with the exchange (Release).

// Buffers are pooled by size class: powers of two from minPooledBuffer to
// maxPooledBuffer, so that a request's small buffer never stands in for a large
// one. A request carrying megabytes of log gets its own buffer, which the garbage
// collector takes back.
const (
	minPooledShift  = 12 // 4 KiB
	maxPooledShift  = 20 // 1 MiB
	maxPooledBuffer = 1 << maxPooledShift
)

// bufferPools are free lists rather than sync.Pools: a sync.Pool is emptied by
// every other garbage collection, and a proxy whose heap is small collects often,
// so the buffers would be allocated again and again. The classes share one bound:
// all free buffers together take at most maxFreeBytes (8 MiB, within the runtime
// allowance of the memory budget), a class at most maxFreeBuffers of them; beyond
// that a released buffer is left to the garbage collector. The bound is shared
// because the requests of one workload fill one or two classes: 50 requests in
// flight on a validating route hold about 50 injected bodies of the 64 KiB class,
// and a bound per class (1 MiB: 16 of them) sent most of them to the collector.
var bufferPools [maxPooledShift - minPooledShift + 1]freeList

const (
	maxFreeBytes   = 8 << 20
	maxFreeBuffers = 256
)

// freeBytes is the capacity of all free buffers of all classes.
var freeBytes atomic.Int64

// freeList is a list of free buffers: one size class's, or traceScratch.
type freeList struct {
	mu   sync.Mutex
	free []*[]byte
}

// get takes a free buffer, or returns nil.
func (l *freeList) get() *[]byte {
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

// putUpTo keeps p when the list holds fewer than limit buffers, and reports
// whether it did.
func (l *freeList) putUpTo(p *[]byte, limit int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) >= limit {
		return false
	}
	l.free = append(l.free, p)
	return true
}

// getBuffer takes a free buffer of class c, or returns nil.
func getBuffer(c int) *[]byte {
	p := bufferPools[c].get()
	if p != nil {
		freeBytes.Add(-int64(cap(*p)))
	}
	return p
}

// putBuffer keeps p for the next request of its class when the shared bound
// allows it.
func putBuffer(p *[]byte) {
	n := int64(cap(*p))
	if freeBytes.Add(n) > maxFreeBytes || !bufferPools[sizeClass(cap(*p))].putUpTo(p, maxFreeBuffers) {
		freeBytes.Add(-n)
	}
}

// sizeClass returns the pool index for a buffer of n bytes (rounded up), or -1
// when n is beyond the largest class.
func sizeClass(n int) int {
	if n > maxPooledBuffer {
		return -1
	}
	c := bits.Len(uint(max(n, 1)-1)) - minPooledShift
	return max(c, 0)
}

// Buffer returns an empty buffer with room for at least n bytes that belongs to
// the exchange: the proxy returns it to a pool once the answer is written and the
// trace stored (Release) and no goroutine holds the exchange any more (Hold);
// outside a proxy the garbage collector takes it. Use it for the bodies the
// exchange holds (Original, Body, Response.Body). Nothing may keep it, or
// anything sharing its memory (a string made without a copy), beyond the
// request, nor hand it to a goroutine that may outlive the request without a
// Hold: the next request writes over it. Appending past its room allocates a new
// array, which is not pooled. Like the rest of the exchange, it is not safe for
// concurrent use: call it from the request's phases only.
//
// Lifetime: until finish, or the last Hold's Release (docs/architecture.md, Lifetimes).
func (ex *Exchange) Buffer(n int) []byte {
	c := sizeClass(n)
	if c < 0 {
		return make([]byte, 0, n)
	}
	p := getBuffer(c)
	if p == nil {
		b := make([]byte, 0, 1<<(c+minPooledShift))
		p = &b
	}
	if ex.buffers == nil {
		ex.buffers = ex.bufferSlots[:0]
	}
	ex.buffers = append(ex.buffers, p)
	return (*p)[:0]
}

// Hold keeps the exchange's buffers (Buffer) — and so Original and Body, which
// may be in one — from going back to the pool until a matching Release, for a
// phase that hands them to a goroutine that may outlive the request (the facts
// stage's background job reads the client's body). Call it in the phase, before
// starting the goroutine; the goroutine calls Release once, when it no longer
// reads them. Only the buffers are held: the goroutine must still read nothing
// of the exchange but what its phase handed it and the Trace.
//
// Lifetime: until finish, or the last Hold's Release (docs/architecture.md, Lifetimes).
func (ex *Exchange) Hold() { ex.holds.Add(1) }

// Release ends one hold on the exchange's buffers (Buffer): the proxy's, which
// it ends once, when the request is finished (the answer written, the trace
// stored, the chain done), or a goroutine's (Hold). The last one returns the
// buffers to the pool: after the proxy's, nothing but a goroutine that holds the
// exchange may read Original, Body or Response.Body. Release is safe to call
// from any goroutine; Holds count the holders besides the proxy, so the last
// release takes the count to -1, and the atomic orders every holder's reads
// before the buffers are reused.
func (ex *Exchange) Release() {
	if ex.holds.Add(-1) >= 0 {
		return
	}
	for i, p := range ex.buffers {
		if poisonReleased {
			b := (*p)[:cap(*p)]
			for j := range b {
				b[j] = poisonByte
			}
		}
		*p = (*p)[:0]
		putBuffer(p)
		ex.buffers[i] = nil
	}
	ex.buffers = ex.buffers[:0]
}

// poisonByte fills a released buffer in a race-enabled build (poisonReleased),
// so that a read after Release sees garbage — an invalid JSON byte — at once,
// rather than only when the pool hands the buffer to another request.
const poisonByte = 0xFF
