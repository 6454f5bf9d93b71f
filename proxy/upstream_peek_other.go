//go:build !unix

package proxy

import "net"

// sockPeek cannot look at a socket on this platform: a pooled connection the
// upstream closed while idle then fails on first use, and the request fails with
// it unless nothing of it was written (see roundTrip).
type sockPeek struct{}

func newSockPeek(net.Conn) *sockPeek { return nil }

func (*sockPeek) closedOrSent() bool { return false }
