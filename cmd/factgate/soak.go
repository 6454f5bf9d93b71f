package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/factgate/factgate/cmd/factgate/internal/loadbench"
	"github.com/factgate/factgate/configs/units"
)

func init() {
	register("soak", "drive a long mixed load at the proxy and report its memory against its budget", runSoak)
}

func runSoak(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	requests := fs.Int("requests", 150000, "requests to send")
	concurrency := fs.Int("concurrency", 32, "concurrent client connections")
	reportEvery := fs.Int("report-every", 15000, "print the proxy's memory every this many requests")
	maxTime := fs.Duration("max-time", 15*time.Minute, "stop after this long")
	factsMemory := fs.String("facts-memory", "", "facts.memory_bytes of the validating route (\"\": the proxy's default)")
	cacheMemory := fs.String("cache-memory", "", "cache.memory.max_bytes (\"\": the default)")
	tracesMemory := fs.String("traces-memory", "", "traces.memory_bytes (\"\": the default)")
	redisURL := fs.String("redis", "", "a Redis URL: the proxy uses memory in front of it, under a key prefix of this run")
	proxyBin := fs.String("proxy-bin", "", "the factgate binary to run as the proxy (\"\": this one), e.g. an older build to compare")
	settle := fs.Duration("settle", 5*time.Second, "after the run, measure again once the proxy has been idle this long")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: factgate soak [flags]")
		fmt.Fprintln(stderr, "\nStarts the mock upstream in this process and the proxy as a child process")
		fmt.Fprintln(stderr, "(factgate serve), drives a mix of pass-through, streamed, validating, session and")
		fmt.Fprintln(stderr, "large-log requests at it, and prints the proxy's RSS and its memory tiers as it")
		fmt.Fprintln(stderr, "goes, then its RSS against its memory budget. All traffic stays on 127.0.0.1.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if *requests <= 0 || *concurrency <= 0 || *reportEvery <= 0 {
		fmt.Fprintln(stderr, "factgate soak: --requests, --concurrency and --report-every must be positive")
		return 2
	}
	for name, v := range map[string]string{"--facts-memory": *factsMemory, "--cache-memory": *cacheMemory, "--traces-memory": *tracesMemory} {
		if v != "" {
			if _, err := units.ParseByteSize(v); err != nil {
				fmt.Fprintf(stderr, "factgate soak: %s: %v\n", name, err)
				return 2
			}
		}
	}
	exe := *proxyBin
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			fmt.Fprintln(stderr, "factgate soak:", err)
			return 1
		}
	}
	err := loadbench.Soak(ctx, loadbench.SoakOptions{
		ProxyBin: exe, Requests: *requests, Concurrency: *concurrency, ReportEvery: *reportEvery, MaxTime: *maxTime,
		FactsMemory: *factsMemory, CacheMemory: *cacheMemory, TracesMemory: *tracesMemory, RedisURL: *redisURL,
		Settle: *settle, Corpus: benchCorpus(),
	}, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "factgate soak:", err)
		return 1
	}
	return 0
}
