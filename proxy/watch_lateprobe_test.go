package proxy

import (
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
