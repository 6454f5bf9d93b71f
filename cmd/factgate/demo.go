package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/mockupstream"
)

func init() {
	register("demo", "run the mock upstream and the proxy in-process and show a request going through", runDemo)
}

// demoConfig is the proxy config of the demo; %MOCK% is the mock upstream's URL.
const demoConfig = `
server:
  listen: 127.0.0.1:0
  drain_grace: 0s
log:
  level: warn
  access: false
upstreams:
  mock:
    base_url: "%MOCK%"
routes:
  - name: ra3-analyst
    models: [ra3-analyst]
    upstream: mock
    upstream_model: deepseek-chat
  - name: ra3-knowledge
    models: [ra3-knowledge]
    upstream: mock
    upstream_model: deepseek-chat
    pack: ra3
    inject: {}
%REVISION_ROUTE%  - name: default
    default: true
    upstream: mock
`

const demoScript = `
default:
  content: "## 对局概览\nPlayerA（盟军）在 1:24 打包主基地，1:41 在新位置展开；9:10 生产第一架世纪轰炸机。"
  usage: {prompt_tokens: 812, completion_tokens: 46}
  headers: {x-request-id: demo-1}
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: factgate demo [--pack ra3|orders]")
		fmt.Fprintln(stderr, "\nStarts the mock upstream and the proxy in this process on free loopback ports,")
		fmt.Fprintln(stderr, "sends a chat completion through the proxy with the go-openai client (streaming and")
		fmt.Fprintln(stderr, "not) and prints what happened. Needs no network and nothing installed.")
		fmt.Fprintln(stderr, "--pack orders tells the orders pack's story instead: a support answer about the")
		fmt.Fprintln(stderr, "orders a tool returned, its draft contradicting a record, silently revised.")
	}
	pack := fs.String("pack", "ra3", "whose story to tell: ra3 (the replay analyst) or orders (customer support)")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if *pack == "orders" {
		return runOrdersDemo(ctx, stdout, stderr)
	}
	if *pack != "ra3" {
		fmt.Fprintf(stderr, "factgate demo: --pack %q: want ra3 or orders\n", *pack)
		return 2
	}
	d, err := startDemo()
	if err != nil {
		fmt.Fprintln(stderr, "factgate demo:", err)
		return 1
	}
	defer d.close()
	if err := d.run(ctx, stdout); err != nil {
		fmt.Fprintln(stderr, "factgate demo:", err)
		return 1
	}
	return 0
}

type demo struct {
	mock  *mockupstream.Server
	srv   *proxy.Server
	base  string
	hdrs  http.Header
	close func()
}

func startDemo() (*demo, error) {
	script, err := mockupstream.ParseScript([]byte(demoScript), "demo")
	if err != nil {
		return nil, err
	}
	script.Rules = append(demoRevisionRules(), script.Rules...)
	return startDemoWith(script, strings.NewReplacer("%REVISION_ROUTE%", demoRevisionRoute).Replace(demoConfig))
}

// startDemoWith starts the mock upstream with script and the proxy with config
// (%MOCK% is the mock's URL).
func startDemoWith(script *mockupstream.Script, config string) (*demo, error) {
	mock := mockupstream.New(mockupstream.Options{Script: script, Record: true})
	if err := mock.Start("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("starting the mock upstream: %w", err)
	}
	cfg, err := proxy.ParseConfig([]byte(strings.ReplaceAll(config, "%MOCK%", mock.URL())), "demo")
	if err != nil {
		mock.Close()
		return nil, err
	}
	srv, err := proxy.New(cfg, proxy.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		mock.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		mock.Close()
		return nil, err
	}
	go func() { _ = srv.Serve(ln) }()
	d := &demo{mock: mock, srv: srv, base: "http://" + ln.Addr().String()}
	d.close = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		mock.Close()
	}
	return d, nil
}

// headerCapture keeps the response headers of the last request a client made.
type headerCapture struct {
	next http.RoundTripper
	last *http.Header
}

func (h headerCapture) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(r)
	if err == nil {
		*h.last = resp.Header.Clone()
	}
	return resp, err
}

// demoKey is the demo client's credential. The proxy runs in passthrough mode, so
// a trace belongs to the credential of its request: the demo reads its traces
// with the same key.
const demoKey = "demo-key"

func (d *demo) client() *goopenai.Client {
	cfg := goopenai.DefaultConfig(demoKey)
	cfg.BaseURL = d.base + "/v1"
	cfg.HTTPClient = &http.Client{Transport: headerCapture{next: http.DefaultTransport, last: &d.hdrs}}
	return goopenai.NewClientWithConfig(cfg)
}

func (d *demo) run(ctx context.Context, w io.Writer) error {
	fmt.Fprintf(w, "factgate demo\n  mock upstream  %s\n  proxy          %s   (an app sets its base URL to %s/v1)\n\n", d.mock.URL(), d.base, d.base)
	c := d.client()
	req := goopenai.ChatCompletionRequest{
		Model:    "ra3-analyst",
		Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "分析这局录像。"}},
	}
	fmt.Fprintln(w, "1. A chat completion through the go-openai client, model alias \"ra3-analyst\":")
	start := time.Now()
	resp, err := c.CreateChatCompletion(ctx, req)
	if err != nil {
		return fmt.Errorf("chat completion: %w", err)
	}
	fmt.Fprintf(w, "   answer (%s): %s\n", time.Since(start).Round(time.Microsecond), resp.Choices[0].Message.Content)
	fmt.Fprintf(w, "   usage: prompt %d, completion %d, total %d\n", resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.TotalTokens)
	fmt.Fprintf(w, "   X-Factgate-Overhead: %s   (time spent in the proxy, upstream excluded)\n", d.hdrs.Get("X-Factgate-Overhead"))
	fmt.Fprintf(w, "   x-request-id from the upstream: %s\n", d.hdrs.Get("X-Request-Id"))
	if err := d.mock.WaitIdle(5 * time.Second); err != nil {
		return err // the mock records a request once its answer is written
	}
	if recs := d.mock.Requests(); len(recs) > 0 {
		last := recs[len(recs)-1]
		fmt.Fprintf(w, "   the upstream received model %q: the route rewrote only that field\n", modelOf(last.Body))
	}

	fmt.Fprintln(w, "\n2. The same request, streamed:")
	req.Stream = true
	req.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
	stream, err := c.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	defer stream.Close()
	var content strings.Builder
	events := 0
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		events++
		if len(chunk.Choices) > 0 {
			content.WriteString(chunk.Choices[0].Delta.Content)
		}
	}
	fmt.Fprintf(w, "   %d events, content equals the non-streamed answer: %v\n", events, content.String() == resp.Choices[0].Message.Content)

	if err := d.runInjection(ctx, w); err != nil {
		return err
	}
	if err := d.runRevision(ctx, w); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nPoint any OpenAI client at the proxy's /v1 and nothing else changes.")
	return nil
}

func modelOf(body []byte) string {
	const key = `"model":"`
	i := strings.Index(string(body), key)
	if i < 0 {
		return ""
	}
	rest := string(body[i+len(key):])
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// --- knowledge injection ---

// demoReplay is the sample operation log the demo sends (a copy of the project's
// fixture ra3/replays/allied_vs_soviet.txt).
//
//go:embed demodata/allied_vs_soviet.txt
var demoReplay string

// runInjection sends the sample replay through a route with the ra3 pack and an
// inject block, then shows what the proxy resolved (from the request's trace) and
// the system prompt the upstream received (from the mock's record).
func (d *demo) runInjection(ctx context.Context, w io.Writer) error {
	fmt.Fprintf(w, "\n3. Knowledge injection: the sample replay (%d lines) through route \"ra3-knowledge\" (pack ra3, inject):\n", strings.Count(demoReplay, "\n"))
	req := goopenai.ChatCompletionRequest{
		Model: "ra3-knowledge",
		Messages: []goopenai.ChatCompletionMessage{
			{Role: "system", Content: "你是红警 3 录像分析助手。"},
			{Role: "user", Content: demoReplayQuestion + "\n" + demoReplay},
		},
	}
	if _, err := d.client().CreateChatCompletion(ctx, req); err != nil {
		return fmt.Errorf("chat completion with the replay: %w", err)
	}
	tr, err := d.trace(ctx, d.hdrs.Get("X-Factgate-Trace-Id"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   resolved from the log's header lines: knowledge set %s, factions %s (player order), map %s\n",
		gjson.GetBytes(tr, "knowledge_set").Str, joinJSON(gjson.GetBytes(tr, "scopes.factions")), joinJSON(gjson.GetBytes(tr, "scopes.maps")))
	if err := d.mock.WaitIdle(5 * time.Second); err != nil {
		return err // the mock records a request once its answer is written
	}
	recs := d.mock.Requests()
	if len(recs) == 0 {
		return errors.New("the mock upstream recorded no request")
	}
	// The replay's request, not simply the last one recorded: the mock records a
	// streamed answer once its last byte is written, which on a loaded machine
	// can be after the client has read that byte and sent this request.
	var msgs []gjson.Result
	for i := len(recs) - 1; i >= 0 && msgs == nil; i-- {
		if bytes.Contains(recs[i].Body, []byte(demoReplayQuestion)) {
			msgs = gjson.GetBytes(recs[i].Body, "messages").Array()
		}
	}
	if len(msgs) == 0 || msgs[0].Get("role").Str != "system" {
		return errors.New("the upstream request has no injected system message")
	}
	prompt := msgs[0].Get("content").Str
	fmt.Fprintf(w, "   the upstream received %d messages; the first is the injected system prompt, %d bytes, %d lines:\n", len(msgs), len(prompt), strings.Count(prompt, "\n")+1)
	lines := strings.Split(prompt, "\n")
	for _, line := range lines[:min(6, len(lines))] {
		fmt.Fprintf(w, "     | %s\n", line)
	}
	fmt.Fprintln(w, "     | ...")
	var sections []string
	for _, line := range lines {
		if strings.HasPrefix(line, "## ") {
			sections = append(sections, strings.TrimPrefix(line, "## "))
		}
	}
	fmt.Fprintf(w, "   its sections: %s\n", strings.Join(sections, " · "))
	if i := strings.Index(prompt, "## 应用的补充要求"); i >= 0 {
		fmt.Fprintf(w, "   the app's own system message is merged at the end: %q\n", strings.TrimSpace(prompt[i:]))
	}
	fmt.Fprintln(w, "   (factgate knowledge render --replay FILE --no-contract prints the same prompt, without the app's part)")
	return nil
}

// trace fetches a request's trace from the proxy (traces are stored just after the
// answer, so it waits a moment for it).
// demoReplayQuestion opens the user message that carries the sample replay.
const demoReplayQuestion = "请分析这局录像。"

func (d *demo) trace(ctx context.Context, id string) ([]byte, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/factgate/v1/traces/"+id, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+demoKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("fetching trace %s: %w", id, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			return b, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("fetching trace %s: status %d: %s", id, resp.StatusCode, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// joinJSON joins a JSON array of strings with ", ".
func joinJSON(r gjson.Result) string {
	var out []string
	for _, v := range r.Array() {
		out = append(out, v.Str)
	}
	return strings.Join(out, ", ")
}
