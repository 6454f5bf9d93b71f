package interceptors

import (
	"math/bits"
	"sync"
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

var bufferPools [maxPooledShift - minPooledShift + 1]sync.Pool // of *[]byte, empty

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
// trace stored (Release); outside a proxy the garbage collector takes it. Use it
// for the bodies the exchange holds (Body, Response.Body). Nothing may keep it,
// or anything sharing its memory (a string made without a copy), beyond the
// request, nor hand it to a goroutine that may outlive the request: the next
// request writes over it. Appending past its room allocates a new array, which is
// not pooled. Like the rest of the exchange, it is not safe for concurrent use.
func (ex *Exchange) Buffer(n int) []byte {
	c := sizeClass(n)
	if c < 0 {
		return make([]byte, 0, n)
	}
	p, _ := bufferPools[c].Get().(*[]byte)
	if p == nil {
		b := make([]byte, 0, 1<<(c+minPooledShift))
		p = &b
	}
	ex.buffers = append(ex.buffers, p)
	return (*p)[:0]
}

// Release returns the exchange's buffers (Buffer) to the pool. The proxy calls it
// once, when the request is finished: the answer written, the trace stored, the
// chain done. After it nothing may read Body or Response.Body.
func (ex *Exchange) Release() {
	for i, p := range ex.buffers {
		*p = (*p)[:0]
		bufferPools[sizeClass(cap(*p))].Put(p)
		ex.buffers[i] = nil
	}
	ex.buffers = ex.buffers[:0]
}
