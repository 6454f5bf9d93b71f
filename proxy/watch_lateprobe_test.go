package proxy

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestWatchLateProbeOfAnEarlierRequest: the probe timer of one request can fire
// late, after the next request armed the connection (a busy scheduler, a long GC
// pause). That stale probe must not read: two probes at once left one reading
// without a deadline, and it took the first byte of the request after, which the
// server then saw as "OPST /v1/chat/completions" (405).
func TestWatchLateProbeOfAnEarlierRequest(t *testing.T) {
	t.Parallel()
	server, client := net.Pipe()
	defer client.Close()
	c := &watchConn{Conn: server, probeAfter: time.Hour}
	req := newRequestCtx()
	c.arm(req) // request N
	c.disarm()
	late := c.gen
	c.arm(req)    // request N+1
	c.probe(late) // N's timer, run late: returns at once without reading
	c.mu.Lock()
	probing := c.probing
	c.mu.Unlock()
	if probing {
		t.Fatal("a probe of the previous request started reading for the next one")
	}
	c.disarm()

	go func() { _, _ = client.Write([]byte("POST /v1/chat/completions")) }()
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "POST" {
		t.Fatalf("the next request reads %q, %v; want POST", got, err)
	}
}

// TestWatchTimerSetForAnEarlierRequestWaits: a connection keeps its probe timer
// from request to request, so it can fire for an earlier request while a later
// one is armed. The later request is probed only once it has run probeAfter
// itself, not when the earlier one's time is up.
func TestWatchTimerSetForAnEarlierRequestWaits(t *testing.T) {
	t.Parallel()
	const probeAfter = 40 * time.Millisecond
	server, client := net.Pipe()
	c := &watchConn{Conn: server, probeAfter: probeAfter}
	first := newRequestCtx()
	c.arm(first)
	c.disarm()
	time.Sleep(probeAfter / 2)
	second := newRequestCtx()
	armed := time.Now()
	c.arm(second)
	_ = client.Close() // the client goes away at once
	select {
	case <-second.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the client went away but the request was not cancelled")
	}
	if took := time.Since(armed); took < probeAfter {
		t.Fatalf("the request was probed %v after it was armed; want at least %v", took, probeAfter)
	}
	if context.Cause(second) != errClientGone || first.Err() != nil {
		t.Fatalf("cause %v; the earlier request's context: %v", context.Cause(second), first.Err())
	}
	c.disarm()
}

// TestWatchTimerFiresEarlyForTheArmedRequest: a fire before the armed request
// has run probeAfter sets the timer again instead of probing.
func TestWatchTimerFiresEarlyForTheArmedRequest(t *testing.T) {
	t.Parallel()
	server, client := net.Pipe()
	defer client.Close()
	c := &watchConn{Conn: server, probeAfter: time.Hour}
	c.arm(newRequestCtx())
	c.fire() // as the timer of an earlier request would
	c.mu.Lock()
	probing, set := c.probing, c.timerSet
	c.mu.Unlock()
	if probing || !set {
		t.Fatalf("probing %v, timer set %v; want a timer set again and no probe", probing, set)
	}
	c.disarm()
}

// BenchmarkWatchArm measures watching one request on a kept-alive connection:
// arm and disarm, the probe never due.
func BenchmarkWatchArm(b *testing.B) {
	server, client := net.Pipe()
	defer client.Close()
	c := &watchConn{Conn: server, probeAfter: time.Hour}
	req := newRequestCtx()
	b.ReportAllocs()
	for b.Loop() {
		c.arm(req)
		c.disarm()
	}
}
