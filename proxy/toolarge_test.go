package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// bigBody is a chat request far over baseConfig's 64 KiB max_request_body.
func bigBody() []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","messages":[{"role":"user","content":"`)
	b.WriteString(strings.Repeat("x", 8<<20))
	b.WriteString(`"}]}`)
	return b.Bytes()
}

// A client still writing a body over max_request_body gets the 413 envelope, not a
// connection reset.
func TestABodyOverTheLimitGets413WhileTheClientIsStillWriting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", "")
	body := bigBody()
	t.Run("net/http client", func(t *testing.T) {
		for i := 0; i < 20; i++ {
			resp, err := http.Post(h.base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatalf("attempt %d: %v", i, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 413 || gjson.GetBytes(b, "error.code").Str != "request_too_large" {
				t.Fatalf("attempt %d: %d %v %s", i, resp.StatusCode, err, b)
			}
		}
	})
	t.Run("a client that writes before it reads", func(t *testing.T) {
		// Like a simple client that sends its whole request before reading: it
		// writes 128 KiB past the limit, then reads.
		for i := 0; i < 20; i++ {
			c, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			head := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
			if _, err := io.WriteString(c, head); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(body[:192<<10]); err != nil {
				c.Close()
				t.Fatalf("attempt %d: writing the body: %v", i, err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				c.Close()
				t.Fatalf("attempt %d: reading the answer: %v", i, err)
			}
			b, err := io.ReadAll(resp.Body)
			c.Close()
			if err != nil || resp.StatusCode != 413 || gjson.GetBytes(b, "error.code").Str != "request_too_large" {
				t.Fatalf("attempt %d: %d %v %s", i, resp.StatusCode, err, b)
			}
		}
	})
}
