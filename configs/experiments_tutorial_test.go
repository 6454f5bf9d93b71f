package configs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// TestTheABTutorialOnTheMock walks docs/experiments.md's "Five minutes, on the
// mock" as written: the mock upstream with configs/mock-script.yaml, factgate
// serve with configs/experiments.yaml pointed at it, 40 users each sending the
// sample replay through an unmodified OpenAI client, then the report. On the mock
// the strict variant's rules get the hedged draft and the baseline the one that
// misquotes the log, so the report shows the difference a real experiment looks
// for, with its interval and p-value.
func TestTheABTutorialOnTheMock(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/experiments.md")
	if err != nil {
		t.Fatal(err)
	}
	tutorial := readmeSection(t, string(doc), "## Five minutes, on the mock")
	for _, want := range []string{
		"./factgate mock-upstream --script configs/mock-script.yaml &",
		"./factgate serve --config configs/experiments.yaml --upstream main=http://127.0.0.1:9090/v1 &",
		`replay = open("cmd/factgate/demodata/mcv_vs_miner.txt").read()`,
		`for i in range(40):`,
		`user=f"player-{i}"`,
		"./factgate experiments report --url http://127.0.0.1:8080",
	} {
		if !strings.Contains(tutorial, want) {
			t.Errorf("the tutorial does not show %q", want)
		}
	}

	script, err := mockupstream.LoadScript("mock-script.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mock := mockupstream.New(mockupstream.Options{Script: script})
	if err := mock.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg, err := proxy.LoadConfig("experiments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.SetUpstreamURL("main", mock.URL()); err != nil {
		t.Fatal(err)
	}
	cfg.Server.DrainGrace = new(units.Duration)
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
	base := "http://" + ln.Addr().String()

	replay, err := os.ReadFile("../cmd/factgate/demodata/mcv_vs_miner.txt")
	if err != nil {
		t.Fatal(err)
	}
	ocfg := goopenai.DefaultConfig("unused")
	ocfg.BaseURL = base + "/v1"
	client := goopenai.NewClientWithConfig(ocfg)
	const users = 40
	for i := range users {
		_, err := client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
			Model: "ra3-analyst", User: fmt.Sprintf("player-%d", i),
			Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "请分析这局录像。\n" + string(replay)}},
		})
		if err != nil {
			t.Fatalf("player-%d: %v", i, err)
		}
	}

	type rate struct {
		Count, Total int64
	}
	var report struct {
		Experiments []struct {
			Variants []struct {
				Name     string
				Requests int64
				Rates    struct {
					FirstDraft rate `json:"first_draft_contradiction"`
				}
			}
			Comparisons []struct {
				Variant, Metric string
				Difference      float64
				High            float64
				PValue          *float64 `json:"p_value"`
			}
		}
	}
	// The counters are written after each answer: read until all 40 are in.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/factgate/v1/experiments")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(body, &report); err != nil || len(report.Experiments) != 1 {
			t.Fatalf("the report: %v\n%s", err, body)
		}
		n := int64(0)
		for _, v := range report.Experiments[0].Variants {
			n += v.Requests
		}
		if n == users || time.Now().After(deadline) {
			if n != users {
				t.Fatalf("the report counts %d requests, want %d:\n%s", n, users, body)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	byName := map[string]rate{}
	for _, v := range report.Experiments[0].Variants {
		byName[v.Name] = v.Rates.FirstDraft
		if v.Requests == 0 {
			t.Errorf("variant %s got no request of %d users", v.Name, users)
		}
	}
	if b := byName["baseline"]; b.Count != b.Total {
		t.Errorf("baseline: %d of %d first drafts contradict the log, want all (the mock's misquoting draft)", b.Count, b.Total)
	}
	if s := byName["strict"]; s.Count != 0 {
		t.Errorf("strict: %d of %d first drafts contradict the log, want none (the mock's hedged draft for the strict rules)", s.Count, s.Total)
	}
	found := false
	for _, c := range report.Experiments[0].Comparisons {
		if c.Variant == "strict" && c.Metric == "first_draft_contradiction" {
			found = true
			if c.Difference >= 0 || c.High >= 0 || c.PValue == nil || *c.PValue >= 0.05 {
				t.Errorf("strict against baseline: difference %.3f, interval up to %.3f, p %v; want fewer contradictions, significant at 5%%", c.Difference, c.High, c.PValue)
			}
		}
	}
	if !found {
		t.Error("the report compares no strict first-draft contradiction rate with the control")
	}
}
