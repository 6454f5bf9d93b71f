package interceptors

import "github.com/factgate/factgate/interceptors/internal/bufpool"

// Buffer returns an empty buffer with room for at least n bytes that belongs to
// the exchange: the proxy returns it to a pool (interceptors/internal/bufpool)
// once the answer is written and the trace stored (Release) and no goroutine
// holds the exchange any more (Hold); outside a proxy the garbage collector takes
// it. Use it for the bodies the exchange holds (Original, Body, Response.Body).
// Nothing may keep it, or anything sharing its memory (a string made without a
// copy), beyond the request, nor hand it to a goroutine that may outlive the
// request without a Hold: the next request writes over it. Appending past its
// room allocates a new array, which is not pooled. Like the rest of the
// exchange, it is not safe for concurrent use: call it from the request's phases
// only.
//
// Lifetime: until finish, or the last Hold's Release (docs/architecture.md, Lifetimes).
func (ex *Exchange) Buffer(n int) []byte {
	p := bufpool.Get(n)
	if p == nil {
		return make([]byte, 0, n)
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
// buffers to the pool (poisoned in race-enabled builds, bufpool.Poisons): after
// the proxy's, nothing but a goroutine that holds the exchange may read
// Original, Body or Response.Body. Release is safe to call from any goroutine;
// Holds count the holders besides the proxy, so the last release takes the count
// to -1, and the atomic orders every holder's reads before the buffers are
// reused.
func (ex *Exchange) Release() {
	if ex.holds.Add(-1) >= 0 {
		return
	}
	for i, p := range ex.buffers {
		bufpool.Put(p)
		ex.buffers[i] = nil
	}
	ex.buffers = ex.buffers[:0]
}
