package configs_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// TestNoProviderAtHandPath walks the README's "No provider at hand?" path exactly:
// the mock upstream with configs/mock-script.yaml, factgate serve with
// configs/factgate.yaml and --upstream main=<the mock>, and the sample replay
// cmd/factgate/demodata/mcv_vs_miner.txt sent by an unmodified OpenAI client. The
// seed's story must show: the draft contradicts the log, the client never sees it
// ("587 就是盟军基地车"), and gets the hedged revision with the headers saying so.
func TestNoProviderAtHandPath(t *testing.T) {
	t.Parallel()
	script, err := mockupstream.LoadScript("mock-script.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mock := mockupstream.New(mockupstream.Options{Script: script, Record: true})
	if err := mock.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })

	cfg, err := proxy.LoadConfig("factgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.SetUpstreamURL("main", mock.URL()); err != nil { // --upstream main=<the mock's base URL>
		t.Fatal(err)
	}
	srv, err := proxy.New(cfg, proxy.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})

	replay, err := os.ReadFile("../cmd/factgate/demodata/mcv_vs_miner.txt")
	if err != nil {
		t.Fatal(err)
	}
	var header http.Header
	ocfg := goopenai.DefaultConfig("unused")
	ocfg.BaseURL = "http://" + ln.Addr().String() + "/v1"
	ocfg.HTTPClient = &http.Client{Transport: tap{next: http.DefaultTransport, header: &header}}
	client := goopenai.NewClientWithConfig(ocfg)
	req := goopenai.ChatCompletionRequest{Model: "ra3-analyst", Messages: []goopenai.ChatCompletionMessage{
		{Role: "user", Content: "请分析这局录像。\n" + string(replay)},
	}}
	resp, err := client.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	content := resp.Choices[0].Message.Content
	if strings.Contains(content, "587 就是盟军基地车") || !strings.Contains(content, "587 可能是盟军基地车") {
		t.Errorf("the client saw:\n%s\nwant the hedged revision, never the draft's \"587 就是盟军基地车\"", content)
	}
	if strings.Contains(content, "[机器可读声明]") {
		t.Errorf("the claims block the proxy asked for reached the client:\n%s", content)
	}
	issues := header.Get("X-Factgate-Issues")
	if header.Get("X-Factgate-Revisions") != "1" || !strings.HasPrefix(issues, "draft=C1") || !strings.HasSuffix(issues, ";final=0;delivered=0") {
		t.Errorf("X-Factgate-Revisions %q, X-Factgate-Issues %q; want 1 and draft=C1…;final=0;delivered=0", header.Get("X-Factgate-Revisions"), issues)
	}

	t.Logf("X-Factgate-Revisions: %s, X-Factgate-Issues: %s", header.Get("X-Factgate-Revisions"), issues)

	// Streamed, the same story.
	req.Stream = true
	stream, err := client.CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var streamed strings.Builder
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(chunk.Choices) > 0 {
			streamed.WriteString(chunk.Choices[0].Delta.Content)
		}
	}
	if streamed.String() != content {
		t.Errorf("streamed:\n%s\nwant the non-streamed answer:\n%s", streamed.String(), content)
	}
}

// tap keeps the last response's headers.
type tap struct {
	next   http.RoundTripper
	header *http.Header
}

func (t tap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		*t.header = resp.Header.Clone()
	}
	return resp, err
}
