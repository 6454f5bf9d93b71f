package interceptors

import "sync"

// The bodies an exchange holds — the injected request, the answer as edited —
// are tens of kilobytes each on a route that injects knowledge. Allocating them
// per request makes most of the proxy's garbage; instead they come from a pool
// and go back once the proxy is done with the exchange (Release).

// maxPooledBuffer is the largest buffer kept for reuse: a request carrying
// megabytes of log gets its own buffer, which the garbage collector takes back.
const maxPooledBuffer = 1 << 20

var bufferPool sync.Pool // of *[]byte, empty

// Buffer returns an empty buffer with room for at least n bytes that belongs to
// the exchange: the proxy returns it to a pool once the answer is written and the
// trace stored (Release); outside a proxy the garbage collector takes it. Use it
// for the bodies the exchange holds (Body, Response.Body). Nothing may keep it,
// or anything sharing its memory (a string made without a copy), beyond the
// request, nor hand it to a goroutine that may outlive the request: the next
// request writes over it. Appending past its room allocates a new array, which is
// not pooled.
func (ex *Exchange) Buffer(n int) []byte {
	p, _ := bufferPool.Get().(*[]byte)
	if p != nil && cap(*p) < n {
		bufferPool.Put(p)
		p = nil
	}
	if p == nil {
		// Room for small growth (a model swap, a longer usage object) without
		// leaving the pooled array.
		b := make([]byte, 0, n+n/8+64)
		p = &b
	}
	if cap(*p) <= maxPooledBuffer {
		ex.buffers = append(ex.buffers, p)
	}
	return (*p)[:0]
}

// Release returns the exchange's buffers (Buffer) to the pool. The proxy calls it
// once, when the request is finished: the answer written, the trace stored, the
// chain done. After it nothing may read Body or Response.Body.
func (ex *Exchange) Release() {
	for i, p := range ex.buffers {
		*p = (*p)[:0]
		bufferPool.Put(p)
		ex.buffers[i] = nil
	}
	ex.buffers = ex.buffers[:0]
}
