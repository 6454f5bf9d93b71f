package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// A client still sending a body over max_request_body reads the 413 and then a
// clean end of the answer, and may finish sending: the proxy reads and discards
// the rest instead of resetting the connection (which destroyed the 413 for 1 in
// ~100 requests of TestProxyErrorsUseTheOpenAIEnvelope).
func TestA413IsNotLostToAReset(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", "") // max_request_body: 64KiB
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := strings.Repeat("x", 200<<10)
	// The headers and a first part of the body: the proxy answers as soon as it
	// reads Content-Length, with the rest of the body unread.
	if _, err := io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: factgate\r\nContent-Type: application/json\r\nContent-Length: 204800\r\n\r\n"+body[:16<<10]); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 413 || gjson.GetBytes(b, "error.code").Str != "request_too_large" {
		t.Fatalf("status %d %s, %v", resp.StatusCode, b, err)
	}
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the answer: %v, want a clean end (io.EOF), not a reset", err)
	}
	if _, err := io.WriteString(conn, body[16<<10:]); err != nil {
		t.Fatalf("sending the rest of the body: %v", err)
	}
}
