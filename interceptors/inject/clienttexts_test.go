package inject

import (
	"bytes"
	"testing"

	"github.com/factgate/factgate/interceptors/reqcontext"
)

// clientTextsJoined is clientTexts as it was before a single text became a
// view of the body: every text copied into one slice.
func clientTextsJoined(body []byte, ml reqcontext.MessageList) ([]byte, int) {
	var out []byte
	n := 0
	for _, m := range ml.Items {
		if !isSystem(m.Role) {
			continue
		}
		mark := len(out)
		if mark > 0 {
			out = append(out, `\n\n`...)
		}
		wrote := false
		eachTextRaw(m.Content(body), func(inner []byte) {
			if len(inner) == 0 {
				return
			}
			if wrote {
				out = append(out, `\n`...)
			}
			out = append(out, inner...)
			wrote = true
		})
		if !wrote {
			out = out[:mark]
			continue
		}
		n++
	}
	return out, n
}

// TestClientTexts: the client's system texts join as they did when each was
// copied; a single one is a view of the body that appending to copies, so the
// body is never written.
func TestClientTexts(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"messages":[{"role":"system","content":"one"},{"role":"user","content":"u"}]}`,
		`{"messages":[{"role":"system","content":"a\nb"},{"role":"developer","content":"c"},{"role":"user","content":"u"}]}`,
		`{"messages":[{"role":"system","content":""},{"role":"system","content":"x"}]}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"p1"},{"type":"image_url"},{"type":"text","text":""},{"type":"text","text":"p2"}]},{"role":"system","content":"q"}]}`,
		`{"messages":[{"role":"system","content":[]},{"role":"system","content":null},{"role":"system","content":[{"type":"text","text":"only"}]}]}`,
		`{"messages":[{"role":"user","content":"no system"}]}`,
	} {
		b := []byte(body)
		ml, ok := reqcontext.FindMessages(b)
		if !ok {
			t.Fatalf("no messages: %s", body)
		}
		got, n := clientTexts(b, ml)
		want, wn := clientTextsJoined(b, ml)
		if !bytes.Equal(got, want) || n != wn {
			t.Errorf("%s: %q (%d), want %q (%d)", body, got, n, want, wn)
		}
		if cap(got) != len(got) && bytes.Contains(b, got) {
			t.Errorf("%s: a view of the body with room past it", body)
		}
		_ = append(got, "XXXXXXXX"...)
		if string(b) != body {
			t.Errorf("appending to the texts wrote the body: %s", b)
		}
	}
}
