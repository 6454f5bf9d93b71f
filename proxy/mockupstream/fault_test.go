package mockupstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	openaigo "github.com/openai/openai-go/v3"
	goopenai "github.com/sashabaranov/go-openai"
)

const faultScript = `
rules:
  - name: status
    match: {last_user: "^status$"}
    answer:
      fault:
        status: 429
        headers: {Retry-After: "30", x-ratelimit-remaining-requests: "0"}
        body: '{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}'
  - name: plain
    match: {last_user: "^plain$"}
    answer:
      fault: {status: 502, body: "<html>bad gateway</html>"}
  - name: slow
    match: {last_user: "^slow$"}
    answer:
      fault: {slow_first_byte: 1m}
  - name: slow-then-fine
    match: {last_user: "^slow-ok$"}
    answer:
      content: late but fine
      fault: {slow_first_byte: 20ms}
  - name: disconnect
    match: {last_user: "^disconnect$"}
    answer:
      content: "abcdefghijkl"
      chunk_size: 4
      fault: {disconnect_after: 3}
  - name: disconnect-late
    match: {last_user: "^disconnect-late$"}
    answer:
      content: "ab"
      fault: {disconnect_after: 100}
  - name: malformed
    match: {last_user: "^malformed$"}
    answer:
      content: "never parsed"
      fault: {malformed: true}
  - name: drop
    match: {last_user: "^drop$"}
    answer:
      fault: {drop: true}
`

func TestStatusFaultIsSentVerbatim(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, user  string
		status      int
		body        string
		contentType string
		headers     map[string]string
	}{
		{
			name: "429 JSON with headers", user: "status", status: 429,
			body:        `{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			contentType: "application/json",
			headers:     map[string]string{"Retry-After": "30", "X-Ratelimit-Remaining-Requests": "0"},
		},
		{name: "502 HTML", user: "plain", status: 502, body: "<html>bad gateway</html>", contentType: "text/plain; charset=utf-8"},
	}
	for _, c := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(c.name+map[bool]string{true: " stream"}[stream], func(t *testing.T) {
				t.Parallel()
				s := startMock(t, mustParse(t, faultScript), Options{})
				resp, raw := post(t, s, "/v1/chat/completions", chatBody("m", c.user, stream), nil)
				if resp.StatusCode != c.status || string(raw) != c.body || resp.Header.Get("Content-Type") != c.contentType {
					t.Errorf("got %d %q %q, want %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), raw, c.status, c.contentType, c.body)
				}
				for k, v := range c.headers {
					if got := resp.Header.Get(k); got != v {
						t.Errorf("header %s = %q, want %q", k, got, v)
					}
				}
				recs, _ := s.WaitFor(1, 5*time.Second)
				if recs[0].Status != c.status || recs[0].Cancelled {
					t.Errorf("recorded status %d cancelled %v", recs[0].Status, recs[0].Cancelled)
				}
			})
		}
	}
}

// TestSlowFirstByteEndsWhenTheClientGivesUp covers every wait before the first byte:
// each is a minute long, and the handler must end as soon as the client leaves.
func TestSlowFirstByteEndsWhenTheClientGivesUp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		user string
		opts Options
	}{
		{name: "slow_first_byte fault", user: "slow"},
		{name: "server latency", user: "plain answer", opts: Options{Latency: time.Minute}},
		{name: "answer latency", user: "late"},
	}
	script := mustParse(t, faultScript)
	script.Rules = append(script.Rules, Rule{Match: Match{LastUser: "^late$"}, Answer: &Answer{Content: "x", Latency: time.Minute}})
	for _, c := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: " non-stream", true: " stream"}[stream], func(t *testing.T) {
				t.Parallel()
				s := startMock(t, script, c.opts)
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(chatBody("m", c.user, stream)))
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("a minute's wait answered within 100ms: %d", resp.StatusCode)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("client error %v, want its deadline", err)
				}
				// The fault waits a minute; the handler must notice the client left long before.
				recs, err := s.WaitFor(1, 10*time.Second)
				if err != nil {
					t.Fatalf("the handler kept waiting after the client left: %v", err)
				}
				if !recs[0].Cancelled || recs[0].Status != 0 {
					t.Errorf("recorded cancelled %v status %d, want cancelled before any status", recs[0].Cancelled, recs[0].Status)
				}
			})
		}
	}
}

func TestSlowFirstByteThenAnswer(t *testing.T) {
	t.Parallel()
	s := startMock(t, mustParse(t, faultScript), Options{})
	_, raw := post(t, s, "/v1/chat/completions", chatBody("m", "slow-ok", false), nil)
	if got := completionContent(t, raw); got != "late but fine" {
		t.Errorf("content %q", got)
	}
}

func TestDisconnectMidStream(t *testing.T) {
	t.Parallel()
	t.Run("raw events", func(t *testing.T) {
		t.Parallel()
		s := startMock(t, mustParse(t, faultScript), Options{})
		resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(chatBody("m", "disconnect", true)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("reading the cut stream: %v, want unexpected EOF", err)
		}
		events := sseData(t, raw)
		if len(events) != 3 || strings.Contains(string(raw), "[DONE]") {
			t.Fatalf("got %d events before the cut, want 3 and no [DONE]: %q", len(events), raw)
		}
		if !strings.Contains(events[2], `"content":"efgh"`) {
			t.Errorf("third event is not the second content piece: %s", events[2])
		}
		recs, _ := s.WaitFor(1, 5*time.Second)
		if recs[0].Status != http.StatusOK || recs[0].Cancelled {
			t.Errorf("recorded status %d cancelled %v: the server cut, the client did not leave", recs[0].Status, recs[0].Cancelled)
		}
	})
	t.Run("cut instead of [DONE] when the stream is shorter", func(t *testing.T) {
		t.Parallel()
		s := startMock(t, mustParse(t, faultScript), Options{})
		resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(chatBody("m", "disconnect-late", true)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(string(raw), "[DONE]") {
			t.Errorf("error %v, body %q: want the whole answer, no [DONE], then an unexpected EOF", err, raw)
		}
	})
	t.Run("go-openai", func(t *testing.T) {
		t.Parallel()
		s := startMock(t, mustParse(t, faultScript), Options{})
		st, err := newGoOpenAI(s).CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{
			Model: "m", Stream: true, Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "disconnect"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var content string
		for {
			chunk, err := st.Recv()
			if err != nil {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("stream ended with %v, want unexpected EOF", err)
				}
				break
			}
			content += chunk.Choices[0].Delta.Content
		}
		if content != "abcdefgh" {
			t.Errorf("content before the cut %q, want abcdefgh", content)
		}
	})
	t.Run("openai-go", func(t *testing.T) {
		t.Parallel()
		s := startMock(t, mustParse(t, faultScript), Options{})
		client := newOpenAIGo(s)
		st := client.Chat.Completions.NewStreaming(context.Background(), openaigo.ChatCompletionNewParams{
			Model: "m", Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage("disconnect")},
		})
		defer st.Close()
		var content string
		for st.Next() {
			content += st.Current().Choices[0].Delta.Content
		}
		if st.Err() == nil || content != "abcdefgh" {
			t.Errorf("stream error %v after %q: want an error after abcdefgh", st.Err(), content)
		}
	})
}

func TestDisconnectMidBody(t *testing.T) {
	t.Parallel()
	s := startMock(t, mustParse(t, faultScript), Options{})
	resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(chatBody("m", "disconnect", false)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading the cut body: %v, want unexpected EOF", err)
	}
	if len(raw) == 0 || int64(len(raw)) >= resp.ContentLength {
		t.Errorf("read %d of the announced %d bytes: want part of the body", len(raw), resp.ContentLength)
	}
	_, err = newGoOpenAI(s).CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
		Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "disconnect"}},
	})
	if err == nil {
		t.Error("go-openai accepted a cut body")
	}
}

func TestMalformedAnswers(t *testing.T) {
	t.Parallel()
	t.Run("non-stream", func(t *testing.T) {
		t.Parallel()
		s := startMock(t, mustParse(t, faultScript), Options{})
		resp, raw := post(t, s, "/v1/chat/completions", chatBody("m", "malformed", false), nil)
		if resp.StatusCode != http.StatusOK || json.Valid(raw) || len(raw) == 0 {
			t.Errorf("got %d %q, want a 200 with invalid JSON", resp.StatusCode, raw)
		}
		_, err := newGoOpenAI(s).CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
			Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "malformed"}},
		})
		if err == nil {
			t.Error("go-openai parsed a malformed body")
		}
	})
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		s := startMock(t, mustParse(t, faultScript), Options{})
		_, raw := post(t, s, "/v1/chat/completions", chatBody("m", "malformed", true), nil)
		events := sseData(t, raw)
		if len(events) != 3 || !json.Valid([]byte(events[0])) || json.Valid([]byte(events[1])) || events[2] != "[DONE]" {
			t.Errorf("want a valid role chunk, one invalid event, [DONE]; got %q", events)
		}
		st, err := newGoOpenAI(s).CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{
			Model: "m", Stream: true, Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "malformed"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Recv(); err != nil {
			t.Fatalf("the role chunk: %v", err)
		}
		var syntax *json.SyntaxError
		if _, err := st.Recv(); !errors.As(err, &syntax) {
			t.Errorf("the malformed event gave %v (%T), want a JSON syntax error", err, err)
		}
	})
}

func TestDropClosesWithoutAResponse(t *testing.T) {
	t.Parallel()
	s := startMock(t, mustParse(t, faultScript), Options{})
	resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(chatBody("m", "drop", false)))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got a response %d from a dropped connection", resp.StatusCode)
	}
	recs, _ := s.WaitFor(1, 5*time.Second)
	if len(recs) != 1 || recs[0].Status != 0 {
		t.Errorf("recorded %+v, want one request without status", recs)
	}
	// The server keeps serving after a fault.
	_, raw := post(t, s, "/v1/chat/completions", chatBody("m", "fine", false), nil)
	if got := completionContent(t, raw); got != "mock answer: fine" {
		t.Errorf("after a drop the mock answered %q", got)
	}
}

func TestClientLeavingMidStreamIsRecorded(t *testing.T) {
	t.Parallel()
	s := startMock(t, &Script{Default: &Answer{Content: strings.Repeat("x", 200), ChunkSize: 1, ChunkDelay: 20 * time.Millisecond}}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(chatBody("m", "q", true)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// The first event arrives while the mock still has ~200 to send: streaming is not
	// buffered.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	resp.Body.Close()
	recs, err := s.WaitFor(1, 10*time.Second)
	if err != nil {
		t.Fatalf("the stream went on after the client left: %v", err)
	}
	if !recs[0].Cancelled || recs[0].Status != http.StatusOK {
		t.Errorf("recorded cancelled %v status %d, want cancelled after 200", recs[0].Cancelled, recs[0].Status)
	}
}
