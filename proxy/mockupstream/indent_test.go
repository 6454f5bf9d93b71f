package mockupstream

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// joinedEvents joins each event's data lines with newlines, as an SSE client does,
// and returns every event's data.
func joinedEvents(t *testing.T, raw []byte) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.Split(strings.TrimSpace(string(raw)), "\n\n") {
		var data []string
		for _, line := range strings.Split(ev, "\n") {
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = append(data, v)
			}
		}
		if len(data) > 0 {
			out = append(out, strings.Join(data, "\n"))
		}
	}
	return out
}

func TestIndentWritesJSONAsProvidersDo(t *testing.T) {
	t.Parallel()
	s := startMock(t, mustParse(t, `default: {content: "hello there", reasoning: "hm"}`), Options{Indent: true})
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		body, stream := chatBody("m", "hi", false), chatBody("m", "hi", true)
		if path == "/v1/responses" {
			body, stream = `{"model":"m","input":"hi"}`, `{"model":"m","input":"hi","stream":true}`
		}
		_, b := post(t, s, path, body, nil)
		if !json.Valid(b) || !bytes.HasSuffix(b, []byte("}\n")) || !bytes.Contains(b, []byte("{\n  \"id\": ")) {
			t.Errorf("%s: not indented JSON ending with a newline:\n%s", path, b)
		}
		_, b = post(t, s, path, stream, nil)
		events := joinedEvents(t, b)
		if len(events) < 4 || !bytes.Contains(b, []byte("data: {\ndata:   ")) {
			t.Fatalf("%s: the events are not spread over data lines:\n%s", path, b)
		}
		for _, d := range events {
			if d != "[DONE]" && !json.Valid([]byte(d)) {
				t.Errorf("%s: an event's joined data lines are not JSON: %q", path, d)
			}
		}
	}
	_, b := post(t, s, "/v1/chat/completions", `{"messages":[]}`, nil)
	if !bytes.HasPrefix(b, []byte("{\n  \"error\": {")) {
		t.Errorf("the mock's own error is not indented: %s", b)
	}
	s.SetIndent(false)
	if _, b := post(t, s, "/v1/chat/completions", chatBody("m", "hi", false), nil); bytes.ContainsRune(b, '\n') {
		t.Errorf("SetIndent(false) still indents: %s", b)
	}
}

func TestPacedAnswerTakesAsLongAsItsStream(t *testing.T) {
	t.Parallel()
	// 40 runes in 4-rune pieces: role, 10 pieces, finish and the end, 13 events
	// 20 ms apart.
	s := startMock(t, mustParse(t, `default: {content: "`+strings.Repeat("abcd", 10)+`", chunk_size: 4, chunk_delay: 20ms, paced: true}`), Options{})
	start := time.Now()
	_, b := post(t, s, "/v1/chat/completions", chatBody("m", "hi", false), nil)
	if took := time.Since(start); took < 13*20*time.Millisecond || !json.Valid(b) {
		t.Errorf("a paced answer came after %v, want at least 260ms (its stream's time): %s", took, b)
	}
	start = time.Now()
	_, _ = post(t, s, "/v1/chat/completions", chatBody("m", "hi", true), nil)
	if took := time.Since(start); took < 12*20*time.Millisecond {
		t.Errorf("the stream took %v, want at least 240ms", took)
	}
}
