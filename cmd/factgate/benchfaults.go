package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/factgate/factgate/cmd/factgate/internal/loadbench"
)

func init() {
	register("bench-faults", "measure retries, fallbacks and the circuit breaker against a failing mock upstream", runBenchFaults)
}

func runBenchFaults(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-faults", flag.ContinueOnError)
	fs.SetOutput(stderr)
	requests := fs.Int("requests", 400, "requests per scenario")
	concurrency := fs.Int("concurrency", 8, "concurrent client connections")
	rate := fs.Float64("rate", 0.3, "share of upstream calls answered 429")
	seed := fs.Uint64("seed", 9, "which calls fail (the mock's random_fault seed)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: factgate bench-faults [flags]")
		fmt.Fprintln(stderr, "\nRuns the mock upstream and the proxy in this process and measures, per scenario,")
		fmt.Fprintln(stderr, "the share of requests answered well and the latency the client sees: a provider")
		fmt.Fprintln(stderr, "that rate-limits a share of the calls (with and without retries, on a pass-through")
		fmt.Fprintln(stderr, "route and through hidden revisions), and a primary that refuses connections with a")
		fmt.Fprintln(stderr, "fallback behind it (with and without the circuit breaker). All traffic stays on 127.0.0.1.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if *requests <= 0 || *concurrency <= 0 || *rate < 0 || *rate > 1 {
		fmt.Fprintln(stderr, "factgate bench-faults: --requests and --concurrency must be positive, --rate between 0 and 1")
		return 2
	}
	err := loadbench.Faults(ctx, loadbench.FaultOptions{
		Requests: *requests, Concurrency: *concurrency, Rate: *rate, Seed: *seed, Corpus: benchCorpus(),
	}, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "factgate bench-faults:", err)
		return 1
	}
	return 0
}
