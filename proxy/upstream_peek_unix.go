//go:build unix

package proxy

import (
	"crypto/tls"
	"net"
	"syscall"
)

// sockPeek looks at a connection's socket without blocking and without consuming
// anything: a non-blocking MSG_PEEK. It is built once per connection so that a
// check costs one system call and no allocation.
type sockPeek struct {
	raw    syscall.RawConn
	peek   func(fd uintptr) bool
	closed bool
	b      [1]byte
}

// newSockPeek returns nil for a connection whose socket it cannot reach.
func newSockPeek(nc net.Conn) *sockPeek {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &sockPeek{raw: raw}
	p.peek = func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), p.b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: nothing to read, the connection is open and quiet. Anything
		// else is a byte, an end of stream or an error such as a reset.
		p.closed = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
		return true
	}
	return p
}

// closedOrSent reports whether the peer closed or reset the connection or sent
// bytes on it. A connection it cannot inspect counts as closed, so the caller
// dials a fresh one rather than risk a request on it.
func (p *sockPeek) closedOrSent() bool {
	if p == nil {
		return true
	}
	if err := p.raw.Read(p.peek); err != nil {
		return true
	}
	return p.closed
}
