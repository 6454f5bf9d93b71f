package proxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// errClientGone is the cancellation cause when a client closes its connection
// before its answer is complete.
var errClientGone = errors.New("client closed the connection")

// requestCtx is the context of a request the proxy serves, cancelled when the
// client goes away or the request is finished (cancel). Cancelling it closes the
// upstream connections of the calls in flight on it (watch), as
// context.AfterFunc would, without the allocations AfterFunc makes for every
// call. Its cause is context.Cause's, and contexts derived from it are cancelled
// with it as from any cancelCtx.
type requestCtx struct {
	context.Context // from context.WithCancelCause
	cancelCause     context.CancelCauseFunc

	mu        sync.Mutex
	cancelled bool
	conns     []*upConn // the watched connections; backed by slots
	slots     [2]*upConn
}

// newRequestCtx returns the context of a request.
func newRequestCtx() *requestCtx { return newRequestCtxIn(context.Background()) }

// newRequestCtxIn returns the context of a request under parent (the one that
// carries its OpenTelemetry span).
func newRequestCtxIn(parent context.Context) *requestCtx {
	r := &requestCtx{}
	r.initIn(parent)
	return r
}

// init readies a zero requestCtx.
func (r *requestCtx) init() { r.initIn(context.Background()) }

// initIn readies a zero requestCtx under parent.
func (r *requestCtx) initIn(parent context.Context) {
	r.Context, r.cancelCause = context.WithCancelCause(parent)
}

// cancel cancels the context with cause (nil: context.Canceled), then closes the
// watched connections; later calls do nothing more.
func (r *requestCtx) cancel(cause error) {
	r.cancelCause(cause) // first: a call that sees its connection closed sees ctx.Err()
	r.mu.Lock()
	r.cancelled = true
	conns := r.conns
	r.conns = nil
	r.mu.Unlock()
	for i, c := range conns {
		_ = c.Close()
		conns[i] = nil
	}
}

// watch closes c when the context is cancelled: at once when it already is.
func (r *requestCtx) watch(c *upConn) {
	r.mu.Lock()
	if r.cancelled {
		r.mu.Unlock()
		_ = c.Close()
		return
	}
	if r.conns == nil {
		r.conns = r.slots[:0]
	}
	r.conns = append(r.conns, c)
	r.mu.Unlock()
}

// unwatch stops watching c. Like the stop function of context.AfterFunc, it
// reports false when the context was cancelled first (c is closed, or being
// closed) or c was not watched.
func (r *requestCtx) unwatch(c *upConn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.conns {
		if w == c {
			last := len(r.conns) - 1
			r.conns[i] = r.conns[last]
			r.conns[last] = nil
			r.conns = r.conns[:last]
			return true
		}
	}
	return false
}

// fasthttp gives a handler no signal when its client goes away, so the proxy wraps
// every accepted connection in a watchConn. While a request has run longer than a
// short delay, a probe reads from the connection: HTTP/1.1 clients send nothing
// while they wait for an answer, so a read that ends in EOF or a reset means the
// client is gone and the request's context is cancelled — which closes the upstream
// connection of that request. A byte that does arrive (a pipelining client) is kept
// and handed back to fasthttp's reader. Cheap requests finish before the probe
// starts and pay only for setting a timer the connection keeps.
//
// fasthttp leaves server.read_timeout's deadline on the connection while the
// handler runs and the answer is written. That deadline bounds reading the
// request, which is over once a request is armed, so the probe lifts it: an answer
// may take as long as the upstream does. fasthttp sets the idle deadline again
// before it reads the connection's next request.
type watchListener struct {
	net.Listener
	probeAfter time.Duration
}

func (l watchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchConn{Conn: c, probeAfter: l.probeAfter}, nil
}

type watchConn struct {
	net.Conn
	probeAfter time.Duration

	// discardOnClose is set when the proxy refused a request whose body the
	// client may still be sending (413); see Close.
	discardOnClose atomic.Bool

	// pending holds bytes a probe or a read-ahead read; fasthttp's next Read gets
	// them first. Only touched by the probe (before probeDone closes) and by
	// fasthttp after disarm.
	pending []byte
	// ahead is the pooled buffer pending points into after a read-ahead (see
	// Read); it goes back to its pool once pending is drained.
	ahead *[]byte

	mu sync.Mutex
	// timer is made at the connection's first request and set again (Reset) by
	// the requests after; it is not stopped when a request ends, so it may fire
	// for an earlier one (see fire). timerSet: it will fire.
	timer     *time.Timer
	timerSet  bool
	armedAt   time.Time
	cancel    *requestCtx
	armed     bool
	probing   bool
	probeDone chan struct{}
	// gen counts arms: a probe fire decided on for an earlier request that runs
	// late (a busy scheduler; disarm and arm in between) must not probe on
	// behalf of the next one, or two probes read at once and one of them, left
	// without a deadline, takes the first byte of the next request
	// ("OPST /v1/chat/completions": 405).
	gen uint64
}

// Read reads what a probe or a read-ahead kept first, then the connection.
//
// fasthttp (with ReduceMemoryUsage, which keeps an idle connection's buffers
// small) waits for each request with a one-byte read, then fills its header
// buffer, then reads the rest of the body: three read syscalls for a 24 KB chat
// request that arrived whole. A small read therefore takes up to readAheadBytes
// into a pooled buffer and hands the rest out from memory: one syscall.
func (c *watchConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		if len(c.pending) == 0 {
			c.pending = nil
			if c.ahead != nil {
				readAheadPool.Put(c.ahead)
				c.ahead = nil
			}
		}
		return n, nil
	}
	if len(p) == 0 || len(p) >= readAheadBelow {
		return c.Conn.Read(p)
	}
	buf := readAheadPool.Get().(*[]byte)
	m, err := c.Conn.Read(*buf)
	n := copy(p, (*buf)[:m])
	if m > n {
		c.ahead, c.pending = buf, (*buf)[n:m]
	} else {
		readAheadPool.Put(buf)
	}
	return n, err
}

// A read of fewer than readAheadBelow bytes reads up to readAheadBytes ahead
// (see watchConn.Read). The buffers are held only while fasthttp reads a request
// off them, so the pool stays about as large as the requests being read at once.
const (
	readAheadBelow = 512
	readAheadBytes = 64 << 10
)

var readAheadPool = sync.Pool{New: func() any {
	b := make([]byte, readAheadBytes)
	return &b
}}

// arm starts watching for the client going away on behalf of one request.
func (c *watchConn) arm(cancel *requestCtx) {
	c.mu.Lock()
	c.cancel = cancel
	c.armed = true
	c.probing = false
	c.gen++
	c.armedAt = time.Now()
	switch {
	case c.timer == nil:
		c.timer = time.AfterFunc(c.probeAfter, c.fire)
	case !c.timerSet:
		c.timer.Reset(c.probeAfter)
	}
	c.timerSet = true
	c.mu.Unlock()
}

// fire runs in the timer's goroutine. The timer outlives the requests it was
// set for, so it probes only for an armed request that has run probeAfter; one
// armed later (the timer was set for an earlier request, or fired late) sets it
// again for the rest of its probeAfter.
func (c *watchConn) fire() {
	c.mu.Lock()
	if !c.armed || c.probing {
		c.timerSet = false
		c.mu.Unlock()
		return
	}
	if rest := c.probeAfter - time.Since(c.armedAt); rest > 0 {
		c.timer.Reset(rest)
		c.mu.Unlock()
		return
	}
	c.timerSet = false
	gen := c.gen
	c.mu.Unlock()
	c.probe(gen)
}

// probe runs in the timer's goroutine (fire) and blocks in Read until the client
// sends something, closes, or disarm interrupts it.
func (c *watchConn) probe(gen uint64) {
	c.mu.Lock()
	if !c.armed || c.gen != gen || c.probing {
		c.mu.Unlock()
		return
	}
	// Under mu, so that disarm's interrupting deadline always comes after this one.
	_ = c.Conn.SetReadDeadline(time.Time{})
	c.probing = true
	done := make(chan struct{})
	c.probeDone = done
	cancel := c.cancel
	c.mu.Unlock()
	defer close(done)

	var b [1]byte
	n, err := c.Conn.Read(b[:])
	if n > 0 {
		c.pending = append(c.pending, b[0])
	}
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		// A deadline is disarm's interruption, not the client leaving.
		return
	}
	c.mu.Lock()
	armed := c.armed
	c.mu.Unlock()
	if armed {
		cancel.cancel(errClientGone)
	}
}

// disarm stops watching; it returns once no probe reads from the connection.
func (c *watchConn) disarm() {
	c.mu.Lock()
	if !c.armed {
		c.mu.Unlock()
		return
	}
	c.armed = false // the timer, left set, fires for nothing or for a later request
	probing, done := c.probing, c.probeDone
	c.mu.Unlock()
	if probing {
		_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
		<-done
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}

// How a connection whose request was refused unread is closed (as net/http does):
// closing a socket with unread data sends a reset, and a reset can reach a client
// that is still writing its body before it read the answer, which it then never
// sees. So the answer is followed by a FIN, up to discardMax more bytes of the
// body are read and dropped, and the socket stays open until discardWait has
// passed since the close began, for the client to read the answer.
const (
	discardMax  = 256 << 10
	discardWait = 500 * time.Millisecond
)

// discardRequestOnClose makes Close drain the rest of the request first (see
// discardMax). Call it from the connection's handler.
func (c *watchConn) discardRequestOnClose() { c.discardOnClose.Store(true) }

// Close closes the connection, after draining a refused request's body when
// discardRequestOnClose was called.
func (c *watchConn) Close() error {
	if c.discardOnClose.Swap(false) {
		c.drainBeforeClose()
	}
	return c.Conn.Close()
}

func (c *watchConn) drainBeforeClose() {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	deadline := time.Now().Add(discardWait)
	if c.Conn.SetReadDeadline(deadline) != nil {
		return
	}
	buf := make([]byte, 32<<10)
	for n := 0; n < discardMax; {
		m, err := c.Conn.Read(buf)
		n += m
		if err != nil {
			// The client closed (it read the answer), or discardWait passed.
			return
		}
	}
	// The client is still sending more than we read: leave its data unread, and
	// the reset for later, until it had discardWait to read the answer.
	time.Sleep(time.Until(deadline))
}
