package configs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// TestTheREADMEsProviderKeyReachesTheProvider runs the README's "Point an app at
// it" both ways it shows, with the mock as a capturing upstream, and asserts the
// key every upstream call carried — the draft and the hidden revision — and that
// the start-up log says the same:
//
//   - configs/factgate.yaml (auth.mode passthrough): the app keeps sending its own
//     provider key, and that is what reaches the provider, even with
//     FACTGATE_UPSTREAM_MAIN_KEY exported (OpenAI SDKs always send a key, so the
//     exported one would only serve a request without one);
//   - configs/keys.yaml (auth.mode keys): the app sends a proxy-issued key and the
//     provider gets FACTGATE_UPSTREAM_MAIN_KEY, never the app's key.
//
// It also checks the README says so: the section names both configs and, for
// keys.yaml, the exported provider key.
func TestTheREADMEsProviderKeyReachesTheProvider(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := readmeSection(t, string(readme), "## Point an app at it")
	for _, want := range []string{
		"serve --config configs/factgate.yaml",
		`api_key=os.environ["DEEPSEEK_API_KEY"]`,
		"export FACTGATE_UPSTREAM_MAIN_KEY=",
		"serve --config configs/keys.yaml",
		`api_key=os.environ["FACTGATE_KEY_APP"]`,
	} {
		if !strings.Contains(section, want) {
			t.Errorf("README's \"Point an app at it\" does not show %q", want)
		}
	}
	if i, j := strings.Index(section, "export FACTGATE_UPSTREAM_MAIN_KEY="), strings.Index(section, "serve --config configs/factgate.yaml"); i >= 0 && j >= 0 && i < j {
		t.Errorf("README's \"Point an app at it\" exports FACTGATE_UPSTREAM_MAIN_KEY before serving configs/factgate.yaml, whose passthrough mode sends the app's own key instead")
	}

	t.Setenv("FACTGATE_UPSTREAM_MAIN_KEY", "sk-exported-provider-key")
	t.Setenv("FACTGATE_KEY_APP", "fg-app-key")
	t.Setenv("FACTGATE_KEY_ADMIN", "fg-admin-key")
	tests := []struct {
		config    string
		clientKey string
		want      string // the Authorization every upstream call carries
		log       string // what the start-up line says upstream main sends
	}{
		{config: "factgate.yaml", clientKey: "sk-the-apps-own-provider-key", want: "Bearer sk-the-apps-own-provider-key",
			log: "the client's own Authorization header"},
		{config: "keys.yaml", clientKey: "fg-app-key", want: "Bearer sk-exported-provider-key",
			log: "FACTGATE_UPSTREAM_MAIN_KEY"},
	}
	for _, tc := range tests {
		t.Run(tc.config, func(t *testing.T) {
			script, err := mockupstream.LoadScript("mock-script.yaml")
			if err != nil {
				t.Fatal(err)
			}
			mock := mockupstream.New(mockupstream.Options{Script: script, Record: true})
			if err := mock.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mock.Close() })
			cfg, err := proxy.LoadConfig(tc.config)
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.SetUpstreamURL("main", mock.URL()); err != nil {
				t.Fatal(err)
			}
			cfg.Server.DrainGrace = new(units.Duration) // shut down at once
			var logs syncBuffer
			srv, err := proxy.New(cfg, proxy.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
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

			line := upstreamKeyLine(t, logs.String(), "main")
			if !strings.Contains(line, tc.log) {
				t.Errorf("the start-up line for upstream main says\n  %s\nwant it to name %q", line, tc.log)
			}

			replay, err := os.ReadFile("../cmd/factgate/demodata/mcv_vs_miner.txt")
			if err != nil {
				t.Fatal(err)
			}
			ocfg := goopenai.DefaultConfig(tc.clientKey)
			ocfg.BaseURL = "http://" + ln.Addr().String() + "/v1"
			resp, err := goopenai.NewClientWithConfig(ocfg).CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
				Model: "ra3-analyst", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "请分析这局录像。\n" + string(replay)}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(resp.Choices[0].Message.Content, "587 可能是盟军基地车") {
				t.Errorf("the app got %q, want the revised answer", resp.Choices[0].Message.Content)
			}
			calls := mock.Requests()
			if len(calls) < 2 {
				t.Fatalf("the provider got %d calls, want the draft and the hidden revision", len(calls))
			}
			for i, c := range calls {
				if got := c.Header.Get("Authorization"); got != tc.want {
					t.Errorf("upstream call %d (%s) carried Authorization %q, want %q", i, c.Rule, got, tc.want)
				}
			}
		})
	}
}

// upstreamKeyLine returns the start-up log line that says which key upstream
// name's calls carry.
func upstreamKeyLine(t *testing.T, logs, name string) string {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) != nil {
			continue
		}
		if rec["msg"] == "upstream key" && rec["upstream"] == name {
			return l
		}
	}
	t.Fatalf("no start-up line says which key upstream %s sends; the log:\n%s", name, logs)
	return ""
}

// readmeSection is the README's text from heading to the next heading of its level.
func readmeSection(t *testing.T, readme, heading string) string {
	t.Helper()
	i := strings.Index(readme, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("the document has no %q", heading)
	}
	rest := readme[i+1+len(heading):]
	level := heading[:strings.IndexByte(heading, ' ')+1]
	if j := strings.Index(rest, "\n"+level); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
