package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
)

// countingConn serves reads from r, whatever size is asked, and counts them.
type countingConn struct {
	net.Conn
	r     io.Reader
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// TestWatchConnReadsAheadOnASmallRead: fasthttp's one-byte wait for a request,
// its header buffer's fill and the body's last read are served by one read of the
// connection, and what comes out is the stream as sent, pipelined requests
// included.
func TestWatchConnReadsAheadOnASmallRead(t *testing.T) {
	stream := make([]byte, 24<<10+3000) // a 24 KB request and part of the next
	for i := range stream {
		stream[i] = byte(rand.IntN(256))
	}
	under := &countingConn{r: bytes.NewReader(stream)}
	c := &watchConn{Conn: under}

	var got []byte
	for _, size := range []int{1, 16383, 7977, 1, 4096} {
		p := make([]byte, size)
		n, err := c.Read(p)
		if err != nil {
			t.Fatalf("read of %d: %v", size, err)
		}
		got = append(got, p[:n]...)
	}
	if under.reads != 1 {
		t.Errorf("the connection was read %d times for %d bytes, want once", under.reads, len(got))
	}
	rest, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, rest...)
	if !bytes.Equal(got, stream) {
		t.Fatalf("read %d bytes, not the %d sent (first difference at %d)", len(got), len(stream), firstDiff(got, stream))
	}
	if c.ahead != nil || c.pending != nil {
		t.Error("the read-ahead buffer was not given back once drained")
	}
}

// TestWatchConnKeepsAProbedByteAfterReadAhead: a byte the disconnect probe read
// while bytes read ahead were still pending comes after them.
func TestWatchConnKeepsAProbedByteAfterReadAhead(t *testing.T) {
	under := &countingConn{r: bytes.NewReader([]byte("GET / HTTP/1.1\r\n\r\nPOS"))}
	c := &watchConn{Conn: under}
	p := make([]byte, 1)
	if _, err := c.Read(p); err != nil {
		t.Fatal(err)
	}
	c.pending = append(c.pending, 'T') // what probe does with the byte it read
	rest := make([]byte, 64)
	n, err := c.Read(rest)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(p) + string(rest[:n]); got != "GET / HTTP/1.1\r\n\r\nPOST" {
		t.Fatalf("read %q", got)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
