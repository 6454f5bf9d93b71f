package mockupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startMock starts a recording mock on a free loopback port and closes it when the
// test ends.
func startMock(t testing.TB, script *Script, opts Options) *Server {
	t.Helper()
	opts.Script = script
	opts.Record = true
	s := New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("starting the mock: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// mustParse decodes a YAML script or fails the test.
func mustParse(t testing.TB, yamlText string) *Script {
	t.Helper()
	s, err := ParseScript([]byte(yamlText), t.Name()+".yaml")
	if err != nil {
		t.Fatalf("parsing the script: %v", err)
	}
	return s
}

// chatBody builds a chat completion request body with one user message.
func chatBody(model, user string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model":    model,
		"stream":   stream,
		"messages": []map[string]any{{"role": "user", "content": user}},
	})
	return string(b)
}

// post sends body to the mock's path and returns the response with its whole body.
func post(t testing.TB, s *Server, path, body string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response of POST %s: %v", path, err)
	}
	return resp, got
}

// completionContent returns choices[0].message.content of a non-stream answer.
func completionContent(t testing.TB, body []byte) string {
	t.Helper()
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("not a chat.completion with one choice (%v): %s", err, body)
	}
	return c.Choices[0].Message.Content
}

// sseData splits an SSE body into its data payloads, in order, failing on anything
// that is not a "data: " event.
func sseData(t testing.TB, body []byte) []string {
	t.Helper()
	var out []string
	for _, ev := range bytes.Split(bytes.TrimSuffix(body, []byte("\n\n")), []byte("\n\n")) {
		line := string(ev)
		if !strings.HasPrefix(line, "data: ") || strings.Contains(line, "\n") {
			t.Fatalf("not one data line per event: %q", line)
		}
		out = append(out, strings.TrimPrefix(line, "data: "))
	}
	return out
}

// envelope is the OpenAI error envelope.
type envelope struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}
