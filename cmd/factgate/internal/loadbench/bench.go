package loadbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors/semantic/eval"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// benchMode is one kind of traffic the benchmark drives.
type benchMode struct {
	name   string
	model  string // the route alias the proxy sees
	stream bool
}

var benchModes = map[string]benchMode{
	"passthrough": {name: "passthrough", model: "bench-model"},
	"stream":      {name: "stream", model: "bench-model", stream: true},
	"validate":    {name: "validate", model: "bench-validate"},
	"ttft":        {name: "ttft", model: "bench-validate", stream: true},
}

// The validating route's performance targets (docs/performance.md "Targets"),
// measured against a direct call that carries the same request in the same run.
const (
	targetValidateRatio = 0.5  // validating req/s ≥ this × direct's
	targetValidateP99   = 2.0  // validating p99 ≤ this × direct's
	targetRSSBase       = 64e6 // RSS after the memory check ≤ this + the configured budgets
	targetRSSFlat       = 0.05 // and grows by at most this share over the second run
	// Tracing on (sampler always on, collector up) lowers the
	// pass-through ratio proxy/direct by at most this share.
	targetTracingDrop = 0.10
)

// targetTraced names the proxy with tracing on in the tables.
const targetTraced = "proxy+otel"

// BenchOptions is one run of Bench; the zero value of a field is not a default
// (the factgate bench command sets them from its flags).
type BenchOptions struct {
	// Exe is the factgate binary the mock upstream child runs as (factgate
	// mock-upstream); ProxyBin the one the proxy children run as ("": Exe).
	Exe, ProxyBin string
	// Requests per target per round, sent by Concurrency connections; Rounds
	// each measure every target once, the order alternating between rounds.
	Requests, Concurrency, Rounds int
	// BodySize is the request body's size for passthrough and stream.
	BodySize int
	// Modes are the kinds of traffic measured, of ModeNames; none is only the
	// memory check.
	Modes []string
	// Warmup is the unmeasured requests per target before a mode's rounds.
	Warmup int
	// MaxTime stops a measurement after this long.
	MaxTime time.Duration
	// AccessLog keeps the proxy's access log on.
	AccessLog bool
	// InProcess runs the proxy in this process (no proxy memory figure, no
	// profiles, no tracing, no ProxyBin).
	InProcess bool
	// CPUProfile and MemProfile, absolute paths, are where the proxy child
	// writes its profiles ("": none).
	CPUProfile, MemProfile string
	// RSSRequests, when positive, adds the memory check: that many validating
	// requests, the proxy's RSS, as many more, its RSS again.
	RSSRequests int
	// Tracing adds a proxy child with OpenTelemetry tracing on, exporting to
	// OTLPEndpoint ("": a receiver in this process).
	Tracing      bool
	OTLPEndpoint string
	// TraceRatio is the share of requests the traced proxy samples (1: always
	// on; below 1: traceidratio). The tracing target is judged at 1 only.
	TraceRatio float64
	// Client is the load driver's HTTP client: ClientFasthttp or ClientNetHTTP.
	Client string
	// Corpus is the sample the requests and the mock's answers are made of.
	Corpus Corpus
}

// proxyBin is the binary the proxy children run as.
// traceRatio is TraceRatio, 1 when unset (zero value).
func (o BenchOptions) traceRatio() float64 {
	if o.TraceRatio <= 0 {
		return 1
	}
	return o.TraceRatio
}

func (o BenchOptions) proxyBin() string {
	if o.ProxyBin != "" {
		return o.ProxyBin
	}
	return o.Exe
}

// ModeNames are the modes Bench knows, in the order its help names them.
var ModeNames = []string{"passthrough", "stream", "validate", "ttft"}

// Bench starts the mock upstream and the proxy as child processes of o.Exe
// (the proxy in this process with o.InProcess), measures each of o.Modes
// directly and through the proxy, and writes its tables to stdout. An error is
// one that stopped the run before its tables (a child that did not start, an
// unknown mode).
func Bench(ctx context.Context, o BenchOptions, stdout io.Writer) error {
	selected := make([]benchMode, 0, len(o.Modes))
	for _, m := range o.Modes {
		bm, ok := benchModes[m]
		if !ok {
			return fmt.Errorf("unknown mode %q (%s)", m, strings.Join(ModeNames, ", "))
		}
		selected = append(selected, bm)
	}
	mock, mockURL, err := startChildMock(ctx, o.Exe, benchScript(o.Corpus.CleanAnswer), ttftChunkSize)
	if err != nil {
		return err
	}
	defer mock.stop()
	mockAddr := hostOf(mockURL)

	var child *benchChild
	var proxyAddr string
	if o.InProcess {
		addr, stop, err := startInProcessProxy(mockURL, o.AccessLog)
		if err != nil {
			return err
		}
		defer stop()
		proxyAddr = addr
	} else {
		var serveArgs []string
		for _, p := range []struct{ flag, path string }{{"--cpu-profile", o.CPUProfile}, {"--mem-profile", o.MemProfile}} {
			if p.path != "" {
				serveArgs = append(serveArgs, p.flag, p.path)
			}
		}
		c, addr, err := startBenchProxy(ctx, o.proxyBin(), mockURL, o.AccessLog, serveArgs)
		if err != nil {
			return err
		}
		defer func() {
			c.stop()
			for _, p := range []string{o.CPUProfile, o.MemProfile} {
				if p == "" {
					continue
				}
				if st, err := os.Stat(p); err != nil || st.Size() == 0 {
					fmt.Fprintf(stdout, "proxy profile missing: %s (the proxy did not shut down cleanly?)\n", p)
					continue
				}
				fmt.Fprintf(stdout, "proxy profile written: %s\n", p)
			}
		}()
		child, proxyAddr = c, addr
	}
	proxyPid := 0
	if child != nil {
		proxyPid = child.cmd.Process.Pid
	}
	mem := benchMemory{proxyPid: proxyPid, mockPid: mock.cmd.Process.Pid}
	// With --tracing, a second proxy child traces every request.
	var traced *tracedProxy
	if o.Tracing {
		tp, err := startTracedProxy(ctx, o.proxyBin(), mockURL, o.AccessLog, o.OTLPEndpoint, o.traceRatio())
		if err != nil {
			return err
		}
		defer tp.stop()
		traced = tp
	}

	if len(selected) > 0 {
		fmt.Fprintf(stdout, "factgate bench: %d requests x %d rounds per target, concurrency %d, body %d bytes\n",
			o.Requests, o.Rounds, o.Concurrency, o.BodySize)
	} else {
		fmt.Fprintf(stdout, "factgate bench: memory check only, concurrency %d\n", o.Concurrency)
	}
	fmt.Fprintf(stdout, "load driver pid %d, mock upstream %s (pid %d)", os.Getpid(), mockAddr, mock.cmd.Process.Pid)
	if child != nil {
		fmt.Fprintf(stdout, ", proxy %s (pid %d)\n", proxyAddr, proxyPid)
	} else {
		fmt.Fprintf(stdout, ", proxy %s (in the load driver's process)\n", proxyAddr)
	}
	if traced != nil {
		fmt.Fprintf(stdout, "traced proxy %s (pid %d): telemetry on, sampler %s, exporting to %s\n", traced.addr, traced.child.cmd.Process.Pid, traced.sampler, traced.endpoint)
	}
	budget, haveBudget := scrapeMemoryBudget(proxyAddr)
	if haveBudget {
		fmt.Fprintf(stdout, "proxy memory budget: %s\n", budget)
	}
	if len(selected) > 0 {
		fmt.Fprintln(stdout, "figures are medians of the rounds [min–max]; rounds alternate which target goes first")
		fmt.Fprintf(stdout, "load driver: %d connections, %s client\n", o.Concurrency, o.Client)
	}
	fmt.Fprintln(stdout)

	validateBody := benchBody(benchModes["validate"], o.BodySize, o.Corpus.Replay)
	proxyServed := 0 // requests the proxy answered before the memory check
	for _, m := range selected {
		if ctx.Err() != nil {
			break
		}
		body := benchBody(m, o.BodySize, o.Corpus.Replay)
		direct := benchTarget{name: "direct", addr: mockAddr, client: o.Client, pid: proxyPid}
		proxied := benchTarget{name: "proxy", addr: proxyAddr, client: o.Client, pid: proxyPid}
		if m.name == "ttft" {
			proxyServed += runTTFT(ctx, stdout, [2]benchTarget{direct, proxied}, o.Requests, o.Concurrency, o.Rounds, o.MaxTime)
			fmt.Fprintf(stdout, "%-12s RSS after the mode: %s\n\n", m.name, mem.line())
			continue
		}
		if m.name == "validate" {
			proxied.check = checkValidated
		}
		targets := []benchTarget{direct, proxied}
		if traced != nil {
			otel := proxied
			otel.name, otel.addr, otel.pid = targetTraced, traced.addr, traced.child.cmd.Process.Pid
			otel.sampled = o.traceRatio()
			targets = append(targets, otel)
		}
		// Warm both paths (connections, pools, the fact index) unmeasured.
		if n := min(o.Warmup, o.Requests); n > 0 {
			for _, t := range targets {
				r := drive(ctx, t, body, n, o.Concurrency, o.MaxTime)
				if t.name == "proxy" {
					proxyServed += r.n
				}
			}
		}
		results := make([][]benchResult, len(targets))
		for r := 0; r < o.Rounds && ctx.Err() == nil; r++ {
			// Each round starts with another target: drift over a run falls on
			// each alike.
			for k := range targets {
				i := (k + r) % len(targets)
				pm := mem
				pm.proxyPid = targets[i].pid
				before := pm.cpu()
				r := drive(ctx, targets[i], body, o.Requests, o.Concurrency, o.MaxTime)
				r.cpu = pm.cpu().since(before)
				results[i] = append(results[i], r)
				if i == 1 {
					proxyServed += r.n
				}
			}
		}
		printMode(stdout, m, targets, results)
		if traced != nil {
			traced.report(stdout, m.name)
		}
		fmt.Fprintf(stdout, "%-12s RSS after the mode: %s\n\n", m.name, mem.line())
	}

	if o.RSSRequests > 0 && ctx.Err() == nil {
		fmt.Fprintf(stdout, "memory check: %d validating requests, then %d more, concurrency %d (the proxy answered %d requests before)\n",
			o.RSSRequests, o.RSSRequests, o.Concurrency, proxyServed)
		proxyServed += runMemoryCheck(ctx, stdout, benchTarget{name: "proxy", addr: proxyAddr, client: o.Client, check: checkValidated}, validateBody,
			o.RSSRequests, o.Concurrency, o.MaxTime, mem, budget, haveBudget)
	}
	if child != nil && ctx.Err() == nil {
		printProxyMemory(stdout, proxyPid, proxyAddr)
	}
	fmt.Fprintf(stdout, "the proxy answered %d requests, warm-up included (divide a --mem-profile's alloc_space by it for bytes per request)\n", proxyServed)
	return nil
}

// benchTarget is where a measurement sends its requests.
type benchTarget struct {
	name string
	addr string
	// client is the HTTP client the load driver sends with: ClientFasthttp or
	// ClientNetHTTP.
	client string
	// check, when set, judges a 200 response by its X-Factgate-Issues header; an
	// error counts the request as failed.
	check func(issues []byte) error
	// pid is the proxy process whose CPU time the measurement reads.
	pid int
	// sampled is the share of requests the traced proxy samples (its
	// --trace-ratio); the tracing target is judged at 1 only.
	sampled float64
}

// The load driver's HTTP clients. The ratio proxy/direct depends on the driver:
// it shares the machine's cores with the mock and the proxy, so a client that
// costs more CPU per request slows both targets alike and moves the ratio toward
// 1. fasthttp is the strictest measure; net/http is what hey, with which issue
// 16's figures were measured, sends with.
const (
	ClientFasthttp = "fasthttp"
	ClientNetHTTP  = "net/http"
)

// checkValidated fails a response the proxy did not validate: the validating route
// sets X-Factgate-Issues on every answer it checked (e.g. "0" for a clean one).
func checkValidated(issues []byte) error {
	if len(issues) == 0 {
		return errors.New("200 without " + validate.HeaderIssues + ": the proxy did not validate the answer")
	}
	return nil
}

// printMode prints one mode's table: a row per target, the ratio and, for the
// validating route, the performance targets.
func printMode(w io.Writer, m benchMode, targets []benchTarget, results [][]benchResult) {
	fmt.Fprintf(w, "%-12s %-10s %s %s %s %7s\n", "mode", "target", padRight("req/s [min–max]", 22),
		padLeft("p50", 9), padRight("   p99 [min–max]", 30), "errors")
	rps, p99 := make([][]float64, len(targets)), make([][]float64, len(targets))
	for i, t := range targets {
		var p50 []float64
		errs, n := 0, 0
		var firstErr, issues string
		for _, r := range results[i] {
			rps[i] = append(rps[i], r.rps())
			p50 = append(p50, float64(r.percentile(50)))
			p99[i] = append(p99[i], float64(r.percentile(99)))
			errs += r.errors
			n += r.n
			if firstErr == "" {
				firstErr = r.firstErr
			}
			if issues == "" {
				issues = r.issues
			}
		}
		lo, hi := minMax(rps[i])
		p99lo, p99hi := minMax(p99[i])
		fmt.Fprintf(w, "%-12s %-10s %s %s %s %7d\n", m.name, t.name,
			padRight(fmt.Sprintf("%.0f [%.0f–%.0f]", median(rps[i]), lo, hi), 22),
			padLeft(fmtLatency(time.Duration(median(p50))), 9),
			padRight(fmt.Sprintf("%9s [%s–%s]", fmtLatency(time.Duration(median(p99[i]))), fmtLatency(time.Duration(p99lo)), fmtLatency(time.Duration(p99hi))), 30),
			errs)
		if firstErr != "" {
			fmt.Fprintf(w, "%-12s first error: %s\n", "", firstErr)
		}
		if t.check != nil {
			fmt.Fprintf(w, "%-12s %d of %d proxy answers validated (%s: %q)\n", "", n-errs, n, validate.HeaderIssues, issues)
		}
		if line := cpuPerRequest(results[i]); line != "" {
			fmt.Fprintf(w, "%-12s CPU per request: %s\n", "", line)
		}
	}
	// Per-round ratios: the targets of a round ran back to back, so drift between
	// rounds cancels out of each ratio.
	ratios := func(a, b int) (ratio, p99Ratio []float64) {
		for r := range min(len(rps[a]), len(rps[b])) {
			if rps[b][r] > 0 {
				ratio = append(ratio, rps[a][r]/rps[b][r])
			}
			if p99[b][r] > 0 {
				p99Ratio = append(p99Ratio, p99[a][r]/p99[b][r])
			}
		}
		return ratio, p99Ratio
	}
	line := func(label string, ratio, p99Ratio []float64) {
		lo, hi := minMax(ratio)
		plo, phi := minMax(p99Ratio)
		fmt.Fprintf(w, "%-12s ratio %s: req/s %.2fx [%.2f–%.2f], p99 %.2fx [%.2f–%.2f]\n",
			m.name, label, median(ratio), lo, hi, median(p99Ratio), plo, phi)
	}
	ratio, p99Ratio := ratios(1, 0)
	if len(ratio) == 0 {
		return
	}
	line("proxy/direct", ratio, p99Ratio)
	if len(targets) > 2 && targets[2].name == targetTraced {
		tr, tp := ratios(2, 0)
		if len(tr) > 0 {
			line(targetTraced+"/direct", tr, tp)
			// What tracing costs: the ratio to direct with it against without it,
			// round by round.
			var drop []float64
			for r := range min(len(tr), len(ratio)) {
				drop = append(drop, 1-tr[r]/ratio[r])
			}
			lo, hi := minMax(drop)
			fmt.Fprintf(w, "%-12s tracing lowers the ratio to direct by %.1f%% [%.1f–%.1f%%]\n", m.name, 100*median(drop), 100*lo, 100*hi)
			switch {
			case m.name != "passthrough":
			case targets[2].sampled < 1:
				fmt.Fprintf(w, "%-12s (the tracing target is judged with every request sampled; this run samples %g of them)\n", m.name, targets[2].sampled)
			default:
				fmt.Fprintf(w, "%-12s target: tracing lowers the pass-through ratio by at most %.0f%%: %s\n", m.name, 100*targetTracingDrop, passMiss(median(drop) <= targetTracingDrop))
			}
		}
	}
	if m.name == "validate" {
		fmt.Fprintf(w, "%-12s target req/s ≥ %.1fx direct: %.3fx %s\n", m.name, targetValidateRatio, median(ratio), passMiss(median(ratio) >= targetValidateRatio))
		fmt.Fprintf(w, "%-12s target p99 ≤ %.1fx direct's: %.3fx %s\n", m.name, targetValidateP99, median(p99Ratio), passMiss(median(p99Ratio) <= targetValidateP99))
	}
}

// runMemoryCheck sends n validating requests twice and prints the proxy's RSS after
// each against its target: ≤ 64 MB + the configured budgets, and flat. It
// returns how many requests it sent.
func runMemoryCheck(ctx context.Context, w io.Writer, t benchTarget, body []byte, n, c int, maxTime time.Duration,
	mem benchMemory, budget soakBudget, haveBudget bool) (sent int) {
	var rss [2]int64
	for i := range rss {
		r := drive(ctx, t, body, n, c, maxTime)
		sent += r.n
		fmt.Fprintf(w, "%-12s after %d: %s; %d errors\n", "", (i+1)*n, mem.line(), r.errors)
		if r.firstErr != "" {
			fmt.Fprintf(w, "%-12s first error: %s\n", "", r.firstErr)
		}
		rss[i], _ = processRSSBytes(mem.proxyPid)
		if ctx.Err() != nil {
			return sent
		}
	}
	if mem.proxyPid == 0 || rss[0] == 0 {
		fmt.Fprintln(w, "no proxy RSS: the proxy runs in the load driver's process")
		return sent
	}
	if !haveBudget {
		fmt.Fprintln(w, "configured budgets: not reported by this proxy (factgate_memory_budget_bytes)")
	} else {
		fmt.Fprintf(w, "configured budgets: %s\n", budget)
		limit := targetRSSBase + float64(budget.budgets)
		fmt.Fprintf(w, "target RSS ≤ 64 MB + budgets (%.1f MB): %.1f MB %s\n", limit/1e6, float64(rss[1])/1e6, passMiss(float64(rss[1]) <= limit))
	}
	growth := float64(rss[1]-rss[0]) / float64(rss[0])
	fmt.Fprintf(w, "target RSS flat over the second %d (≤ +%.0f%%): %+.1f MB (%+.1f%%) %s\n\n", n, targetRSSFlat*100,
		float64(rss[1]-rss[0])/1e6, growth*100, passMiss(growth <= targetRSSFlat))
	return sent
}

// padRight and padLeft pad s with spaces to width runes (fmt's widths count bytes,
// and the table has en dashes and µ).
func padRight(s string, width int) string {
	return s + strings.Repeat(" ", max(0, width-utf8.RuneCountInString(s)))
}

func padLeft(s string, width int) string {
	return strings.Repeat(" ", max(0, width-utf8.RuneCountInString(s))) + s
}

func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// benchMemory reads the RSS of the proxy and mock children.
type benchMemory struct {
	proxyPid, mockPid int // 0: not a child of this process
}

// line renders both processes' VmRSS and VmHWM (peak) in MB.
func (m benchMemory) line() string {
	one := func(name string, pid int) string {
		if pid == 0 {
			return name + " in this process"
		}
		rss, hwm, err := processRSS(pid)
		if err != nil {
			return name + " " + err.Error()
		}
		return fmt.Sprintf("%s %s (peak %s)", name, kBToMB(rss), kBToMB(hwm))
	}
	return one("proxy", m.proxyPid) + ", " + one("mock", m.mockPid)
}

// processCPUs is the CPU time (user + system) of the load driver (this process),
// the mock and the proxy; a process that is not running apart counts in the
// driver's.
type processCPUs struct{ driver, mock, proxy time.Duration }

// cpu reads the three processes' CPU time so far.
func (m benchMemory) cpu() processCPUs {
	var c processCPUs
	c.driver, _ = processCPU(0)
	if m.mockPid != 0 {
		c.mock, _ = processCPU(m.mockPid)
	}
	if m.proxyPid != 0 {
		c.proxy, _ = processCPU(m.proxyPid)
	}
	return c
}

// since is the CPU time used since before.
func (c processCPUs) since(before processCPUs) processCPUs {
	return processCPUs{driver: c.driver - before.driver, mock: c.mock - before.mock, proxy: c.proxy - before.proxy}
}

// cpuPerRequest renders the median over the rounds of each process's CPU time per
// request: where the two cores went. "" when /proc could not be read.
func cpuPerRequest(rounds []benchResult) string {
	var driver, mock, proxy []float64
	for _, r := range rounds {
		if r.n == 0 || r.cpu.driver <= 0 {
			continue
		}
		n := float64(r.n)
		driver = append(driver, float64(r.cpu.driver.Microseconds())/n)
		mock = append(mock, float64(r.cpu.mock.Microseconds())/n)
		proxy = append(proxy, float64(r.cpu.proxy.Microseconds())/n)
	}
	if len(driver) == 0 {
		return ""
	}
	total := median(driver) + median(mock) + median(proxy)
	return fmt.Sprintf("load driver %.0f µs, mock %.0f µs, proxy %.0f µs (sum %.0f µs)", median(driver), median(mock), median(proxy), total)
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go runs on.
const clockTicks = 100

// processCPU reads the user and system CPU time of a process from /proc (pid 0:
// this process).
func processCPU(pid int) (time.Duration, error) {
	path := "/proc/self/stat"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: the fields after it follow
	// its closing parenthesis. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New(path + ": no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New(path + ": too few fields")
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// kBToMB turns /proc's "12345 kB" into "12.6 MB".
func kBToMB(v string) string {
	kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	if err != nil {
		return v
	}
	return fmt.Sprintf("%.1f MB", float64(kb)*1024/1e6)
}

// processRSSBytes is a process's VmRSS in bytes.
func processRSSBytes(pid int) (int64, error) {
	if pid == 0 {
		return 0, errors.New("no process")
	}
	rss, _, err := processRSS(pid)
	if err != nil {
		return 0, err
	}
	kb, err := strconv.ParseInt(strings.TrimSuffix(rss, " kB"), 10, 64)
	return kb * 1024, err
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minMax(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	return slices.Min(xs), slices.Max(xs)
}

// benchScript answers a request carrying an operation log with the clean
// analysis (Corpus.CleanAnswer), and every other chat completion with a fixed
// ~300-byte answer.
func benchScript(cleanAnswer string) *mockupstream.Script {
	s := &mockupstream.Script{
		Rules: []mockupstream.Rule{{
			Name:   "analysis",
			Match:  mockupstream.Match{LastUser: `\[操作记录\]`},
			Answer: &mockupstream.Answer{Content: cleanAnswer, Usage: &mockupstream.Usage{PromptTokens: 9000, CompletionTokens: 900}},
		}, {
			Name:   "ttft",
			Match:  mockupstream.Match{LastUser: "^" + ttftGreeting},
			Answer: ttftAnswer(),
		}},
		Default: &mockupstream.Answer{
			Content: "PlayerA 在 1:24 打包主基地并向地图中央迁移，1:41 在新位置展开；中期建造机场，9:10 生产第一架世纪轰炸机。这是基准测试的固定回答，长度约三百字节。",
			Usage:   &mockupstream.Usage{PromptTokens: 512, CompletionTokens: 64},
		},
	}
	return s
}

// benchBody builds a chat completion request of about size bytes; the validate
// mode sends the sample replay (about 23 KB) instead.
func benchBody(m benchMode, size int, replay string) []byte {
	if m.name == "validate" {
		b, _ := json.Marshal(map[string]any{
			"model":       m.model,
			"temperature": 0.35,
			"messages": []map[string]string{
				{"role": "system", "content": "你是红警 3 录像分析助手。"},
				{"role": "user", "content": "分析这局录像。\n\n" + replay},
			},
		})
		return b
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"model":%q,"temperature":0.35,"stream":%v,"messages":[{"role":"system","content":"You analyse replays."},{"role":"user","content":"`, m.model, m.stream)
	filler := "0:02.10 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)\\n"
	for b.Len()+len(filler)+10 < size {
		b.WriteString(filler)
	}
	for b.Len()+4 < size {
		b.WriteByte('x')
	}
	b.WriteString(`"}]}`)
	return b.Bytes()
}

type benchResult struct {
	n        int
	errors   int
	firstErr string
	issues   string // the first X-Factgate-Issues value seen
	elapsed  time.Duration
	lat      []time.Duration
	// cpu is the CPU time each process used during the measurement.
	cpu processCPUs
}

func (r benchResult) rps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.n) / r.elapsed.Seconds()
}

// percentile is the p-th percentile of the latencies (nearest rank).
func (r benchResult) percentile(p float64) time.Duration { return eval.Percentile(r.lat, p) }

// drive sends n requests to t at concurrency c and measures them.
func drive(ctx context.Context, t benchTarget, body []byte, n, c int, maxTime time.Duration) benchResult {
	newSender, closeIdle := fasthttpSender(t, body, c)
	if t.client == ClientNetHTTP {
		newSender, closeIdle = netHTTPSender(t, body, c)
	}
	defer closeIdle()
	var next atomic.Int64
	var errs atomic.Int64
	var firstErr, issues atomic.Value
	lat := make([]time.Duration, n)
	deadline := time.Now().Add(maxTime)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send, release := newSender()
			defer release()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil || time.Now().After(deadline) {
					return
				}
				t0 := time.Now()
				v, err := send()
				lat[i] = time.Since(t0)
				if err == nil && t.check != nil {
					err = t.check(v)
				}
				if err == nil && len(v) > 0 && issues.Load() == nil {
					issues.CompareAndSwap(nil, string(v))
				}
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	wg.Wait()
	done := int(min(next.Load(), int64(n)))
	r := benchResult{n: done, errors: int(errs.Load()), elapsed: time.Since(start), lat: lat[:done]}
	if v, ok := firstErr.Load().(string); ok {
		r.firstErr = v
	}
	if v, ok := issues.Load().(string); ok {
		r.issues = v
	}
	return r
}

// A benchSender sends one request of a load driver's worker and returns the
// answer's X-Factgate-Issues header; an answer other than 200 is an error. Each
// worker gets its own sender (newSender) and releases it when done.
type benchSender func() (issues []byte, err error)

// fasthttpSender sends with a fasthttp.HostClient of c connections, each worker
// reusing one request and one response.
func fasthttpSender(t benchTarget, body []byte, c int) (newSender func() (benchSender, func()), closeIdle func()) {
	client := &fasthttp.HostClient{Addr: t.addr, MaxConns: c, ReadTimeout: 30 * time.Second, WriteTimeout: 10 * time.Second}
	newSender = func() (benchSender, func()) {
		req := fasthttp.AcquireRequest()
		resp := fasthttp.AcquireResponse()
		req.Header.SetMethod("POST")
		req.SetRequestURI("http://" + t.addr + "/v1/chat/completions")
		req.Header.SetContentType("application/json")
		req.Header.Set("Authorization", "Bearer bench")
		req.SetBodyRaw(body)
		send := func() ([]byte, error) {
			if err := client.Do(req, resp); err != nil {
				return nil, err
			}
			if resp.StatusCode() != 200 {
				return nil, fmt.Errorf("status %d: %.200s", resp.StatusCode(), resp.Body())
			}
			return resp.Header.Peek(validate.HeaderIssues), nil
		}
		return send, func() {
			fasthttp.ReleaseRequest(req)
			fasthttp.ReleaseResponse(resp)
		}
	}
	return newSender, client.CloseIdleConnections
}

// netHTTPSender sends with one net/http client shared by the workers, keeping up
// to c idle connections, a new request per send and the answer read to its end —
// as hey does.
func netHTTPSender(t benchTarget, body []byte, c int) (newSender func() (benchSender, func()), closeIdle func()) {
	tr := &http.Transport{MaxIdleConnsPerHost: c, ResponseHeaderTimeout: 30 * time.Second}
	client := &http.Client{Transport: tr, Timeout: 40 * time.Second}
	url := "http://" + t.addr + "/v1/chat/completions"
	newSender = func() (benchSender, func()) {
		send := func() ([]byte, error) {
			req, err := http.NewRequest("POST", url, bytes.NewReader(body))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer bench")
			resp, err := client.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
				return nil, fmt.Errorf("status %d: %s", resp.StatusCode, msg)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				return nil, err
			}
			return []byte(resp.Header.Get(validate.HeaderIssues)), nil
		}
		return send, func() {}
	}
	return newSender, tr.CloseIdleConnections
}

func fmtLatency(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
}

// benchChild is a child process of bench or soak: the proxy under test ("factgate
// serve") or the mock upstream ("factgate mock-upstream"), with its temporary
// directory (config or script).
type benchChild struct {
	cmd *exec.Cmd
	dir string
}

func (c *benchChild) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
	}
	_ = os.RemoveAll(c.dir)
}

// startInProcessProxy serves the bench config in this process.
func startInProcessProxy(mockURL string, accessLog bool) (string, func(), error) {
	addr, err := freeAddr()
	if err != nil {
		return "", nil, err
	}
	cfg, err := proxy.ParseConfig([]byte(fmt.Sprintf(benchConfig, addr, accessLog, mockURL)), "bench")
	if err != nil {
		return "", nil, err
	}
	srv, err := proxy.New(cfg, proxy.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	go func() { _ = srv.Serve(ln) }()
	return addr, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// startBenchProxy writes a bench config and starts "exe serve" on it with the extra
// serve flags.
func startBenchProxy(ctx context.Context, exe, mockURL string, accessLog bool, serveArgs []string) (*benchChild, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	child, err := startChildProxy(ctx, exe, addr, fmt.Sprintf(benchConfig, addr, accessLog, mockURL), serveArgs...)
	return child, addr, err
}

// startChildProxy writes cfg (listening on addr) and starts "exe serve" on it with
// the extra serve flags.
func startChildProxy(ctx context.Context, exe, addr, cfg string, serveArgs ...string) (*benchChild, error) {
	return startChildProxyEnv(ctx, exe, addr, cfg, nil, serveArgs...)
}

// startChildProxyEnv is startChildProxy with env added to the child's
// environment.
func startChildProxyEnv(ctx context.Context, exe, addr, cfg string, env []string, serveArgs ...string) (*benchChild, error) {
	dir, err := os.MkdirTemp("", "factgate-bench-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{"serve", "--config", path}, serveArgs...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var logs bytes.Buffer
	cmd.Stdout = &logs
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the proxy: %w", err)
	}
	child := &benchChild{cmd: cmd, dir: dir}
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, _, err := fasthttp.GetTimeout(nil, "http://"+addr+"/readyz", time.Second)
		if err == nil && status == 200 {
			return child, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			child.stop()
			return nil, fmt.Errorf("the proxy did not become ready: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const benchConfig = `# written by factgate bench
server:
  listen: %q
  drain_grace: 0s
log:
  level: warn
  access: %v
upstreams:
  mock:
    base_url: %q
    max_concurrent: 4096
routes:
  - name: bench-validate
    models: [bench-validate]
    upstream: mock
    pack: ra3
    inject: {}
    validate: {}
  - name: bench
    default: true
    upstream: mock
`

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// processRSS reads a process's resident and peak resident memory from /proc.
func processRSS(pid int) (rss, hwm string, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	if rss == "" {
		return "", "", errors.New("no VmRSS")
	}
	return rss, hwm, nil
}
