package main

import (
	"context"
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
  - name: default
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
		fmt.Fprintln(stderr, "Usage: factgate demo")
		fmt.Fprintln(stderr, "\nStarts the mock upstream and the proxy in this process on free loopback ports,")
		fmt.Fprintln(stderr, "sends a chat completion through the proxy with the go-openai client (streaming and")
		fmt.Fprintln(stderr, "not) and prints what happened. Needs no network and nothing installed.")
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
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
	mock := mockupstream.New(mockupstream.Options{Script: script, Record: true})
	if err := mock.Start("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("starting the mock upstream: %w", err)
	}
	cfg, err := proxy.ParseConfig([]byte(strings.ReplaceAll(demoConfig, "%MOCK%", mock.URL())), "demo")
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

func (d *demo) client() *goopenai.Client {
	cfg := goopenai.DefaultConfig("demo-key")
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
