package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// TestOwnBodyTakesFasthttpsBuffer: the exchange gets the client's body without a
// copy — fasthttp's own buffer — and fasthttp no longer holds that buffer, so the
// connection's next request cannot write over it while the exchange reads it.
func TestOwnBodyTakesFasthttpsBuffer(t *testing.T) {
	var rc fasthttp.RequestCtx
	want := bytes.Repeat([]byte(`{"k":"v"}`), 2000)
	rc.Request.SetBody(want)
	body := rc.PostBody()
	ex := &interceptors.Exchange{}
	got := ownBody(&rc, ex, body)
	if !bytes.Equal(got, want) {
		t.Fatal("ownBody changed the body")
	}
	if &got[0] != &body[0] {
		t.Error("ownBody copied the body instead of taking fasthttp's buffer")
	}
	if b := rc.Request.Body(); len(b) != 0 {
		t.Fatalf("fasthttp still holds a body of %d bytes", len(b))
	}
	rc.Request.AppendBody([]byte("next request"))
	if !bytes.Equal(got, want) {
		t.Fatal("fasthttp's next body wrote over the exchange's")
	}
	ex.Release()

	// A body that is not fasthttp's buffer is copied.
	other := append([]byte(nil), want...)
	ex = &interceptors.Exchange{}
	if got := ownBody(&rc, ex, other); !bytes.Equal(got, want) || &got[0] == &other[0] {
		t.Error("a body that is not fasthttp's was not copied")
	}
	ex.Release()
}

// TestKeepAliveRequestsKeepTheirBodies: requests of different sizes, one after
// another on a keep-alive connection, each reach the upstream as sent, while the
// exchange and fasthttp trade body buffers between them (ownBody).
func TestKeepAliveRequestsKeepTheirBodies(t *testing.T) {
	h, _ := newInjectHarness(t)
	for i, size := range []int{5_000, 40_000, 300, 9_000, 33_000, 5_000, 60_000} {
		text := fmt.Sprintf("request %d: %s", i, strings.Repeat(string(rune('a'+i)), size))
		user, _ := json.Marshal(text)
		status, _, _ := h.post(t, "/v1/chat/completions", `{"model":"ra3-analyst","messages":[{"role":"user","content":`+string(user)+`}]}`)
		if status != 200 {
			t.Fatalf("request %d: status %d", i, status)
		}
		msgs := gjson.GetBytes(h.lastRequest(t).Body, "messages").Array()
		if got := msgs[len(msgs)-1].Get("content").Str; got != text {
			t.Fatalf("request %d: the upstream got a user text of %d bytes starting %.40q, want %d bytes starting %.40q", i, len(got), got, len(text), text)
		}
	}
}
