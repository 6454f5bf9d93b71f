package proxy

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestRequestCtxClosesWatchedConnections: cancelling a request's context closes
// the upstream connections of its calls in flight, and only those; its cause is
// context.Cause's, and a context derived from it ends with it.
func TestRequestCtxClosesWatchedConnections(t *testing.T) {
	t.Parallel()
	pipe := func() (*upConn, net.Conn) {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return &upConn{Conn: a}, b
	}
	closed := func(c *upConn) bool {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return err != nil && !isTimeout(err) // a pipe closed at this end: io.ErrClosedPipe
	}

	req := newRequestCtx()
	derived, stopDerived := context.WithTimeout(req, time.Hour)
	defer stopDerived()
	first, _ := pipe()
	second, _ := pipe()
	done, _ := pipe()
	for _, c := range []*upConn{first, second, done} {
		req.watch(c)
	}
	if !req.unwatch(done) {
		t.Fatal("unwatching a watched connection reported the context cancelled")
	}
	if req.unwatch(done) {
		t.Fatal("unwatching a connection twice reported it watched")
	}
	req.cancel(errClientGone)
	if req.Err() == nil || context.Cause(req) != errClientGone || context.Cause(derived) != errClientGone {
		t.Fatalf("after cancel: err %v, cause %v, derived cause %v", req.Err(), context.Cause(req), context.Cause(derived))
	}
	if !closed(first) || !closed(second) {
		t.Fatal("a watched connection stayed open after the request was cancelled")
	}
	if closed(done) {
		t.Fatal("a connection no longer watched was closed")
	}
	if req.unwatch(first) {
		t.Fatal("unwatch after the cancel reported the connection still watched (it would be pooled closed)")
	}
	late, _ := pipe()
	req.watch(late)
	if !closed(late) {
		t.Fatal("a connection watched after the cancel stayed open")
	}
	req.cancel(nil) // a second cancel changes nothing
	if context.Cause(req) != errClientGone {
		t.Fatalf("cause after a second cancel: %v", context.Cause(req))
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
