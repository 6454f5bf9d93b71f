package proxy

import (
	"io"
	"net"
	"sync/atomic"
	"time"
)

// Bounds of a lingering close.
const (
	// lingerMaxBytes is how much of an unread request the proxy still reads and
	// discards after answering it with an error.
	lingerMaxBytes = 4 << 20
	// lingerTimeout bounds that reading.
	lingerTimeout = 2 * time.Second
)

// lingerListener wraps each accepted connection in a lingerConn.
type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lingerConn{Conn: c}, nil
}

// lingerConn closes the way net/http's server does after answering a request it
// did not read to the end (a body over max_request_body, headers over
// max_header_size): closing a TCP connection with unread bytes sends a reset, and
// a reset can destroy the answer in the client's receive buffer before the client,
// still busy writing its body, reads it — the client then sees "connection reset"
// or "broken pipe" instead of the 413. So it shuts the write side (the client
// reads the answer and its end), reads and discards what the client still sends —
// up to lingerMaxBytes, for at most lingerTimeout, in the background — and then
// closes.
type lingerConn struct {
	net.Conn
	linger atomic.Bool
}

// lingerOnClose makes the next Close a lingering one.
func (c *lingerConn) lingerOnClose() { c.linger.Store(true) }

// Close implements net.Conn.
func (c *lingerConn) Close() error {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !c.linger.Load() || !ok {
		return c.Conn.Close()
	}
	if err := cw.CloseWrite(); err != nil {
		return c.Conn.Close()
	}
	go func() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
		_, _ = io.CopyN(io.Discard, c.Conn, lingerMaxBytes)
		_ = c.Conn.Close()
	}()
	return nil
}

// lingerAfterError makes the connection of rc close lingering once its error
// answer is written.
func lingerAfterError(conn net.Conn) {
	if wc, ok := conn.(*watchConn); ok {
		conn = wc.Conn
	}
	if lc, ok := conn.(*lingerConn); ok {
		lc.lingerOnClose()
	}
}
