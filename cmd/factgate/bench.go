package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/factgate/factgate/cmd/factgate/internal/loadbench"
)

func init() {
	register("bench", "measure the proxy against calling the mock upstream directly", runBench)
}

// benchCleanAnswer is a correct analysis of the sample replay with seven unit
// claims, one event and one timeline claim: validation finds nothing to revise,
// so the validating route makes exactly one upstream call.
//
//go:embed demodata/clean_answer.md
var benchCleanAnswer string

// benchCorpus is what the load harness's requests and mock answers are made of:
// the demo's replay and story.
func benchCorpus() loadbench.Corpus {
	return loadbench.Corpus{Replay: demoReplay, CleanAnswer: benchCleanAnswer, Ask: demoAsk, RevisionRules: demoRevisionRules}
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	requests := fs.Int("requests", 20000, "requests per target per round")
	concurrency := fs.Int("concurrency", 50, "concurrent client connections")
	rounds := fs.Int("rounds", 3, "rounds; each measures direct and proxy once, the order alternating between rounds")
	bodySize := fs.Int("body-size", 2048, "request body size in bytes (passthrough and stream; validate sends the 24 KB sample replay)")
	modes := fs.String("modes", "passthrough,stream", "comma-separated: passthrough, stream, validate, ttft (empty: only the memory check)")
	warmup := fs.Int("warmup", 1000, "unmeasured requests per target before a mode's rounds (at most --requests)")
	maxTime := fs.Duration("max-time", 2*time.Minute, "stop a measurement after this long")
	accessLog := fs.Bool("access-log", false, "keep the proxy's per-request access log on")
	inProcess := fs.Bool("in-process", false, "run the proxy in this process instead of as a child (no proxy memory figure, no profiles)")
	proxyBin := fs.String("proxy-bin", "", "the factgate binary to run as the proxy (\"\": this one), e.g. an older build to compare")
	cpuProfile := fs.String("cpu-profile", "", "write the proxy child's pprof CPU profile to `FILE` (passed to factgate serve)")
	memProfile := fs.String("mem-profile", "", "write the proxy child's pprof heap/alloc profile to `FILE` when it stops")
	rssRequests := fs.Int("rss-requests", 0, "memory check: after the modes, send N validating requests, record the proxy's RSS, send N more, record again (0: off)")
	tracing := fs.Bool("tracing", false, "also measure a proxy with OpenTelemetry tracing on (telemetry.enabled, OTEL_TRACES_SAMPLER=always_on) beside the one without, interleaved, exporting to --otlp-endpoint or to an OTLP receiver this process runs")
	traceRatio := fs.Float64("trace-ratio", 1, "with --tracing: the share of requests the traced proxy samples (1: OTEL_TRACES_SAMPLER=always_on; below 1: traceidratio with that ratio)")
	otlpEndpoint := fs.String("otlp-endpoint", "", "with --tracing: the OTLP/HTTP collector the traced proxy exports to, e.g. http://127.0.0.1:4318 (\"\": one in this process that accepts and counts the spans)")
	clientName := fs.String("client", loadbench.ClientFasthttp, "the load driver's HTTP client: "+loadbench.ClientFasthttp+" (the lightest), or "+loadbench.ClientNetHTTP+" (Go's standard client, as the load generator hey uses)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: factgate bench [flags]")
		fmt.Fprintln(stderr, "\nStarts the mock upstream (factgate mock-upstream) and the proxy (factgate serve) as")
		fmt.Fprintln(stderr, "child processes; this process is the load driver. For each mode it sends the same")
		fmt.Fprintln(stderr, "requests at the mock directly and through the proxy, interleaved, for --rounds")
		fmt.Fprintln(stderr, "rounds, and prints per target the median req/s, p50 and p99 of the rounds with")
		fmt.Fprintln(stderr, "their min–max, the ratio proxy/direct, and the RSS of the proxy and of the mock.")
		fmt.Fprintln(stderr, "The validate mode also prints the performance targets with PASS or MISS; the ttft mode")
		fmt.Fprintln(stderr, "the time to first token of a streamed greeting on the validating route; --rss-requests")
		fmt.Fprintln(stderr, "adds the memory check; --tracing a third target, a proxy with OpenTelemetry tracing on.")
		fmt.Fprintln(stderr, "All traffic stays on 127.0.0.1 and is bounded in count and time.")
		fmt.Fprintln(stderr, "See docs/performance.md.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	var selected []string
	for _, m := range strings.Split(*modes, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		if !slices.Contains(loadbench.ModeNames, m) {
			fmt.Fprintf(stderr, "factgate bench: unknown mode %q (%s)\n", m, strings.Join(loadbench.ModeNames, ", "))
			return 2
		}
		selected = append(selected, m)
	}
	if *requests <= 0 || *concurrency <= 0 || *rounds <= 0 || *bodySize < 64 || *warmup < 0 || *rssRequests < 0 {
		fmt.Fprintln(stderr, "factgate bench: --requests, --concurrency and --rounds must be positive, --body-size at least 64")
		return 2
	}
	if *clientName != loadbench.ClientFasthttp && *clientName != loadbench.ClientNetHTTP {
		fmt.Fprintf(stderr, "factgate bench: unknown --client %q (%s, %s)\n", *clientName, loadbench.ClientFasthttp, loadbench.ClientNetHTTP)
		return 2
	}
	if len(selected) == 0 && *rssRequests == 0 {
		fmt.Fprintln(stderr, "factgate bench: nothing to measure: no --modes and no --rss-requests")
		return 2
	}
	if *inProcess && (*cpuProfile != "" || *memProfile != "" || *proxyBin != "" || *tracing) {
		fmt.Fprintln(stderr, "factgate bench: --cpu-profile, --mem-profile, --proxy-bin and --tracing need the proxy child (not --in-process)")
		return 2
	}
	if *traceRatio <= 0 || *traceRatio > 1 {
		fmt.Fprintln(stderr, "factgate bench: --trace-ratio is a ratio above 0, at most 1")
		return 2
	}
	if *traceRatio != 1 && !*tracing {
		fmt.Fprintln(stderr, "factgate bench: --trace-ratio is for --tracing")
		return 2
	}
	if *otlpEndpoint != "" && !*tracing {
		fmt.Fprintln(stderr, "factgate bench: --otlp-endpoint is for --tracing")
		return 2
	}
	// The proxy child writes the profiles from its own working directory.
	for _, p := range []*string{cpuProfile, memProfile} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			fmt.Fprintln(stderr, "factgate bench:", err)
			return 2
		}
		*p = abs
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "factgate bench:", err)
		return 1
	}
	err = loadbench.Bench(ctx, loadbench.BenchOptions{
		Exe: exe, ProxyBin: *proxyBin,
		Requests: *requests, Concurrency: *concurrency, Rounds: *rounds, BodySize: *bodySize,
		Modes: selected, Warmup: *warmup, MaxTime: *maxTime, AccessLog: *accessLog, InProcess: *inProcess,
		CPUProfile: *cpuProfile, MemProfile: *memProfile, RSSRequests: *rssRequests,
		Tracing: *tracing, TraceRatio: *traceRatio, OTLPEndpoint: *otlpEndpoint, Client: *clientName,
		Corpus: benchCorpus(),
	}, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "factgate bench:", err)
		return 1
	}
	return 0
}
