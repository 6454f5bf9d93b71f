package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/interceptors"
)

// editPhase edits the outgoing request and the answer, with sjson, as injection
// and revision do.
type editPhase struct{ requests, responses atomic.Int32 }

func (*editPhase) Name() string { return "edit" }
func (p *editPhase) OnRequest(_ context.Context, ex *interceptors.Exchange) error {
	p.requests.Add(1)
	var err error
	ex.Body, err = sjson.SetBytes(ex.Body, "temperature", 0.35)
	return err
}
func (p *editPhase) OnResponse(_ context.Context, ex *interceptors.Exchange) error {
	p.responses.Add(1)
	if !ex.Response.OK() {
		return nil
	}
	ex.SetHeader("X-Factgate-Edited", "1")
	return ex.Response.SetContent(ex.Response.Content() + " [checked]")
}

func readSSE(t *testing.T, body io.Reader) (comments int, content string, events []string) {
	t.Helper()
	r := bufio.NewReader(body)
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		switch {
		case strings.HasPrefix(line, ":"):
			comments++
		case strings.HasPrefix(line, "data: "):
			data := strings.TrimSpace(strings.TrimPrefix(line, "data: "))
			events = append(events, data)
			b.WriteString(gjson.Get(data, "choices.0.delta.content").Str)
		}
		if err != nil {
			return comments, b.String(), events
		}
	}
}

// gatePhase holds the answer until the test opens the gate, so tests about
// held streams depend on what the client saw, not on the machine's speed.
type gatePhase struct{ open chan struct{} }

func (gatePhase) Name() string { return "gate" }
func (p gatePhase) OnResponse(ctx context.Context, ex *interceptors.Exchange) error {
	select {
	case <-p.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// streamThroughGate posts a streaming request to the held route, reads the
// keep-alives (blank lines) the client gets while the gate holds the answer
// (failing on anything else), then opens the gate and returns the response and the rest
// of its body.
func streamThroughGate(t *testing.T, h *harness, gate gatePhase, keepAlives int) (*http.Response, *bufio.Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", h.base+"/v1/chat/completions",
		strings.NewReader(`{"model":"held","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	r := bufio.NewReader(resp.Body)
	for seen := 0; seen < keepAlives; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended after %d of %d keep-alives: %v", seen, keepAlives, err)
		}
		if line != keepAlive {
			t.Fatalf("the held stream sent %q before the answer was released", line)
		}
		seen++
	}
	close(gate.open)
	return resp, r
}

func TestHeldStreamSendsKeepAlivesThenTheAnswer(t *testing.T) {
	t.Parallel()
	gate := gatePhase{open: make(chan struct{})}
	h := newHarness(t, `default: {content: "held answer"}`, clientConfig, WithChain("held", gate))
	resp, rest := streamThroughGate(t, h, gate, 3)
	_, content, events := readSSE(t, rest)
	if content != "held answer" || len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("content %q events %v", content, events)
	}
	if resp.Header.Get("X-Factgate-Trace-Id") == "" {
		t.Fatal("no trace id header")
	}
}

func TestHeldStreamReportsAnUpstreamErrorAfterCommitting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
default:
  latency: 350ms
  fault: {status: 500, body: '{"error":{"message":"upstream exploded","type":"server_error","param":null,"code":"boom"}}'}
`, clientConfig, WithChain("held", holdChain{}))
	resp, err := http.Post(h.base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"held","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: the stream was committed before the error", resp.StatusCode)
	}
	_, _, events := readSSE(t, resp.Body)
	if len(events) < 1 || gjson.Get(events[0], "error.code").Str != "boom" {
		t.Fatalf("want the upstream error as an event, got %v", events)
	}
}

func TestHeldRouteQuickErrorsKeepTheirStatus(t *testing.T) {
	t.Parallel()
	// A 500 is not retried (a 503 would be, and would no longer be quick).
	h := newHarness(t, `default: {fault: {status: 500, body: '{"error":{"message":"down","type":"x","param":null,"code":"down"}}'}}`, clientConfig, WithChain("held", holdChain{}))
	for _, stream := range []string{"false", "true"} {
		status, _, body := h.post(t, "/v1/chat/completions", `{"model":"held","stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
		if status != 500 || gjson.GetBytes(body, "error.code").Str != "down" {
			t.Fatalf("stream=%s: %d %s", stream, status, body)
		}
	}
}

func TestInterceptorEditsRequestInPlaceAndAnswer(t *testing.T) {
	t.Parallel()
	p := &editPhase{}
	h := newHarness(t, `default: {content: "answer"}`, clientConfig, WithChain("held", p))
	body := `{"zz":1,"model":"held","messages":[{"role":"user","content":"x","name":"n"}],"stream_options":{"include_usage":true},"aa":[true]}`
	status, hdr, resp := h.post(t, "/v1/chat/completions", body)
	if status != 200 || gjson.GetBytes(resp, "choices.0.message.content").Str != "answer [checked]" || hdr.Get("X-Factgate-Edited") != "1" {
		t.Fatalf("%d %v %s", status, hdr, resp)
	}
	want := `{"zz":1,"model":"held","messages":[{"role":"user","content":"x","name":"n"}],"stream_options":{"include_usage":true},"aa":[true],"temperature":0.35}`
	if got := string(h.lastRequest(t).Body); got != want {
		t.Fatalf("upstream body\n got %s\nwant %s", got, want)
	}
	// A streaming client: the upstream call is made without streaming.
	status, _, resp = h.post(t, "/v1/chat/completions", strings.Replace(body, `"zz":1`, `"zz":1,"stream":true`, 1))
	if status != 200 || !strings.Contains(string(resp), "[checked]") || !strings.Contains(string(resp), `"usage":{`) {
		t.Fatalf("%d %s", status, resp)
	}
	up := h.lastRequest(t).Body
	if gjson.GetBytes(up, "stream").Bool() || gjson.GetBytes(up, "stream_options").Exists() {
		t.Fatalf("upstream was asked to stream: %s", up)
	}
	if p.requests.Load() != 2 || p.responses.Load() != 2 {
		t.Fatalf("phases ran %d/%d times", p.requests.Load(), p.responses.Load())
	}
}

func TestClientDisconnectDuringHeldStreamCancelsTheChain(t *testing.T) {
	t.Parallel()
	cancelled := make(chan struct{})
	phase := &cancelWatch{cancelled: cancelled}
	h := newHarness(t, `default: {content: "x"}`, clientConfig, WithChain("held", phase))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", h.base+"/v1/chat/completions",
		strings.NewReader(`{"model":"held","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read the first keep-alive, then go away.
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(3 * time.Second):
		t.Fatal("the chain's context was not cancelled when the client went away")
	}
}

type cancelWatch struct{ cancelled chan struct{} }

func (*cancelWatch) Name() string { return "cancel-watch" }
func (c *cancelWatch) OnResponse(ctx context.Context, _ *interceptors.Exchange) error {
	select {
	case <-ctx.Done():
		close(c.cancelled)
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return nil
	}
}

func TestKeysAuth(t *testing.T) {
	os.Setenv("FACTGATE_KEY_TEST_APP", "fg-secret-1")
	os.Setenv("FACTGATE_TEST_UPSTREAM_KEY", "sk-upstream")
	h := newHarness(t, "", `
auth:
  mode: keys
  keys: [{name: app, key_env: FACTGATE_KEY_TEST_APP}]
upstreams:
  mock: {base_url: "%MOCK%", api_key_env: FACTGATE_TEST_UPSTREAM_KEY}
routes:
  - {name: default, default: true, upstream: mock}
`)
	body := `{"model":"m","messages":[{"role":"user","content":"x"}]}`
	for _, tc := range []struct {
		name, auth string
		status     int
		code       string
	}{
		{"no key", "", 401, "missing_api_key"},
		{"wrong key", "Bearer fg-secret-2", 401, "invalid_api_key"},
		{"right key", "Bearer fg-secret-1", 200, ""},
	} {
		status, _, resp := h.post(t, "/v1/chat/completions", body, "Authorization", tc.auth)
		if status != tc.status || gjson.GetBytes(resp, "error.code").Str != tc.code {
			t.Fatalf("%s: %d %s", tc.name, status, resp)
		}
	}
	if got := h.lastRequest(t).Header.Get("Authorization"); got != "Bearer sk-upstream" {
		t.Fatalf("upstream saw Authorization %q", got)
	}
	if strings.Contains(h.logs.String(), "fg-secret-1") || strings.Contains(h.logs.String(), "sk-upstream") {
		t.Fatal("a secret reached the logs")
	}
}

func TestGracefulShutdownDrainsInFlightRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `default: {content: "finished", latency: 400ms}`, "")
	done := make(chan int, 1)
	go func() {
		status, _, _, err := h.tryPost("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
		if err != nil {
			t.Errorf("the in-flight request: %v", err)
		}
		done <- status
	}()
	if err := h.mock.WaitForStarted(1, 10*time.Second); err != nil {
		t.Fatalf("the request never reached the upstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case status := <-done:
		if status != 200 {
			t.Fatalf("in-flight request ended with %d", status)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("in-flight request did not finish")
	}
}

// variantPhase sets a header in its request phase and holds the answer, as an
// experiment does on a route whose revision takes a while.
type variantPhase struct{ gatePhase }

func (variantPhase) OnRequest(_ context.Context, ex *interceptors.Exchange) error {
	ex.SetHeader("X-Factgate-Variant", "strict")
	return nil
}

func TestHeldStreamCarriesRequestPhaseHeaders(t *testing.T) {
	t.Parallel()
	gate := gatePhase{open: make(chan struct{})}
	h := newHarness(t, `default: {content: "held answer"}`, clientConfig, WithChain("held", variantPhase{gate}))
	resp, rest := streamThroughGate(t, h, gate, 1)
	if _, content, _ := readSSE(t, rest); content != "held answer" {
		t.Fatalf("content %q", content)
	}
	if got := resp.Header.Get("X-Factgate-Variant"); got != "strict" {
		t.Fatalf("X-Factgate-Variant = %q on a committed stream", got)
	}
}

func TestMalformedUpstreamAnswerOnAHeldRouteIs502(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `default: {fault: {malformed: true}}`, clientConfig, WithChain("held", holdChain{}))
	for _, stream := range []string{"false", "true"} {
		status, _, body := h.post(t, "/v1/chat/completions", `{"model":"held","stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
		if status != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_bad_response" {
			t.Fatalf("stream=%s: %d %s", stream, status, body)
		}
	}
	if status, _, _ := h.post(t, "/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"x"}]}`); status != 200 {
		t.Fatalf("the proxy stopped serving: %d", status)
	}
}

// revisingPhase holds the answer until its gate opens, then sets the headers a
// revision sets.
type revisingPhase struct{ gatePhase }

func (revisingPhase) Name() string { return "revising" }
func (p revisingPhase) OnResponse(ctx context.Context, ex *interceptors.Exchange) error {
	if err := p.gatePhase.OnResponse(ctx, ex); err != nil {
		return err
	}
	ex.SetHeader("X-Factgate-Revisions", "1")
	ex.SetHeader("X-Factgate-Issues", "draft=C1;final=C1;delivered=0")
	ex.SetHeader("X-Factgate-Notice", "%E2%9A%A0%20UnitId%20733")
	return nil
}

func TestHeldStreamTellsLateHeadersInAComment(t *testing.T) {
	t.Parallel()
	gate := gatePhase{open: make(chan struct{})}
	h := newHarness(t, `default: {content: "revised answer"}`, clientConfig, WithChain("held", revisingPhase{gate}))
	resp, rest := streamThroughGate(t, h, gate, 1)
	raw, _ := io.ReadAll(rest)
	resp.Body.Close()
	body := string(raw)
	if resp.Header.Get("X-Factgate-Revisions") != "" {
		t.Fatal("X-Factgate-Revisions is an HTTP header of a stream committed before the revision")
	}
	i := strings.Index(body, ": X-Factgate-Revisions: 1\n: X-Factgate-Issues: draft=C1;final=C1;delivered=0\n: X-Factgate-Notice: %E2%9A%A0%20UnitId%20733\n")
	if i < 0 || i > strings.Index(body, "data: [DONE]") {
		t.Fatalf("no late-header comment before [DONE]:\n%s", body)
	}
	// Real clients ignore the comments.
	cfg := goopenai.DefaultConfig("k")
	cfg.BaseURL = h.base + "/v1"
	stream, err := goopenai.NewClientWithConfig(cfg).CreateChatCompletionStream(context.Background(),
		goopenai.ChatCompletionRequest{Model: "held", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var content strings.Builder
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(chunk.Choices) > 0 {
			content.WriteString(chunk.Choices[0].Delta.Content)
		}
	}
	if content.String() != "revised answer" {
		t.Fatalf("go-openai read %q", content.String())
	}
}
