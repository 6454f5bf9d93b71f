package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/factgate/factgate/proxy/mockupstream"
)

func init() {
	register("mock-upstream", "run the scripted OpenAI-compatible mock upstream (for tests, demos, benchmarks)", runMockUpstream)
}

// mockShutdownGrace bounds how long in-flight answers may take to finish on SIGTERM.
const mockShutdownGrace = 10 * time.Second

// runMockUpstream serves the mock upstream until ctx is cancelled, then shuts down
// gracefully.
func runMockUpstream(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mock-upstream", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9090", "address to listen on (host:port; port 0 picks a free one)")
	scriptPath := fs.String("script", "", "YAML script of rules and answers (see docs/mock-upstream.md); empty: echo the last user message")
	latency := fs.Duration("latency", 0, "wait before every answer starts, unless the script's answer sets its own (e.g. 200ms)")
	chunkSize := fs.Int("chunk-size", mockupstream.DefaultChunkSize, "runes per streamed event, unless the answer sets its own")
	chunkDelay := fs.Duration("chunk-delay", 0, "wait between streamed events, unless the answer sets its own (e.g. 20ms)")
	models := fs.String("models", mockupstream.DefaultModel, "comma-separated model ids that /v1/models lists")
	analyst := fs.String("analyst", "", "answer with a stochastic model after the script's rules: ra3 (the replay analyst) or orders (the support assistant of the orders pack)")
	errorRate := fs.Float64("error-rate", 0.3, "with --analyst: the probability that each claim of a first answer is wrong")
	fixRate := fs.Float64("fix-rate", 0.8, "with --analyst: the probability that a revision fixes each wrong claim it is told about")
	seed := fs.Uint64("seed", 1, "with --analyst: the seed of its answers")
	indent := fs.Bool("indent", false, "write answers and errors as indented JSON ending with a newline, and each streamed event's JSON over several data: lines (as many providers write JSON)")
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprintf(w, "Usage: factgate mock-upstream [flags]\n\n"+
			"Serves an OpenAI-compatible API on loopback: POST /v1/chat/completions and\n"+
			"POST /v1/responses (stream and non-stream; stored answers under GET /v1/responses/{id}),\n"+
			"GET /v1/models, and /echo/... (answers with the request it received).\n"+
			"Answers come from --script; see docs/mock-upstream.md. Runs until SIGINT or SIGTERM.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// The flag package's own printing is silenced so that --help goes to stdout and a
	// mistake is said once, on stderr.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "factgate mock-upstream: %v (run \"factgate mock-upstream --help\")\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "factgate mock-upstream: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *chunkSize <= 0 {
		fmt.Fprintf(stderr, "factgate mock-upstream: --chunk-size %d must be positive\n", *chunkSize)
		return 2
	}
	if *latency < 0 || *chunkDelay < 0 {
		fmt.Fprintln(stderr, "factgate mock-upstream: --latency and --chunk-delay must not be negative")
		return 2
	}
	var script *mockupstream.Script
	if *scriptPath != "" {
		s, err := mockupstream.LoadScript(*scriptPath)
		if err != nil {
			fmt.Fprintf(stderr, "factgate mock-upstream: %v\n", err)
			return 1
		}
		script = s
	}
	if *analyst != "" {
		if script == nil {
			script = &mockupstream.Script{}
		}
		switch *analyst {
		case "ra3":
			a := &mockupstream.Analyst{Seed: *seed, ErrorRate: *errorRate, FixRate: *fixRate}
			script.Rules = append(script.Rules, a.Rule())
		case "orders":
			a := &mockupstream.OrdersAnalyst{Seed: *seed, ErrorRate: *errorRate, FixRate: *fixRate}
			script.Rules = append(script.Rules, a.Rule())
		default:
			fmt.Fprintf(stderr, "factgate mock-upstream: --analyst %q: want ra3 or orders\n", *analyst)
			return 2
		}
	}
	var ids []string
	for _, m := range strings.Split(*models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			ids = append(ids, m)
		}
	}

	srv := mockupstream.New(mockupstream.Options{
		Script:     script,
		Models:     ids,
		Latency:    *latency,
		ChunkSize:  *chunkSize,
		ChunkDelay: *chunkDelay,
		Indent:     *indent,
	})
	if err := srv.Start(*listen); err != nil {
		fmt.Fprintf(stderr, "factgate mock-upstream: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "mock upstream listening: base URL %s\n", srv.URL())

	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), mockShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "factgate mock-upstream: shutting down: %v\n", err)
		_ = srv.Close()
		return 1
	}
	fmt.Fprintln(stdout, "mock upstream stopped")
	return 0
}
