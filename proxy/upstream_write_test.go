package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestWriteRequestSendsWhatRequestWriteWould: whichever way writeRequest sends a
// request — through the write buffer, or as one writev of header and body — the
// upstream reads the bytes fasthttp's Request.Write produces, and written counts
// them all.
func TestWriteRequestSendsWhatRequestWriteWould(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
	}{
		{"empty body", ""},
		{"small body", `{"model":"m","messages":[]}`},
		{"body at the buffer's size", strings.Repeat("x", 8192-300)},
		{"injected request", `{"messages":[{"role":"system","content":"` + strings.Repeat("知识 ", 9000) + `"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func(req *fasthttp.Request) {
				req.Header.SetMethod(fasthttp.MethodPost)
				req.Header.SetRequestURI("/v1/chat/completions?x=1")
				req.Header.SetHost("upstream.test")
				req.Header.Set("Authorization", "Bearer k")
				req.Header.SetContentType("application/json")
				req.SetBodyRaw([]byte(tc.body))
			}
			var want bytes.Buffer
			var ref fasthttp.Request
			build(&ref)
			bw := bufio.NewWriter(&want)
			if err := ref.Write(bw); err != nil {
				t.Fatal(err)
			}
			_ = bw.Flush()

			got := make(chan []byte, 1)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					got <- nil
					return
				}
				defer c.Close()
				b, _ := io.ReadAll(io.LimitReader(c, int64(want.Len())))
				got <- b
			}()
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			c := &upConn{Conn: nc, tcp: nc.(*net.TCPConn)}
			c.bw = bufio.NewWriterSize(c, 8192)
			var req fasthttp.Request
			build(&req)
			if err := c.writeRequest(&req); err != nil {
				t.Fatal(err)
			}
			wire := <-got
			if !bytes.Equal(wire, want.Bytes()) {
				t.Fatalf("the upstream read %d bytes:\n%.300q\nRequest.Write gives %d:\n%.300q", len(wire), wire, want.Len(), want.Bytes())
			}
			// The header of a one-writev send is kept in c.head.
			if large := len(tc.body) > 8192; (len(c.head) > 0) != large {
				t.Errorf("body of %d bytes: sent with one writev = %v, want %v", len(tc.body), len(c.head) > 0, large)
			}
			if c.written != want.Len() {
				t.Errorf("written = %d, the request is %d bytes", c.written, want.Len())
			}
		})
	}
}
