package loadbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// soakConfig is the proxy a soak run drives: a validating RA3 route with an A/B
// experiment (so its counters are written too) and a pass-through default route,
// both on the in-process mock. %s are the listen address, the mock's URL, the
// route's facts block, the cache block and the traces block.
const soakConfig = `# written by factgate soak
server:
  listen: %q
log:
  level: warn
  access: false
upstreams:
  mock:
    base_url: %q
    max_concurrent: 4096
routes:
  - name: soak-validate
    models: [soak-validate]
    upstream: mock
    pack: ra3
    inject: {}
    validate: {}
    experiment:
      name: soak
      control: a
      variants:
        - {name: a, weight: 50}
        - {name: b, weight: 50, temperature: 0.2}
%s  - name: soak
    default: true
    upstream: mock
%s%s`

// soakMix is the traffic, per 100 requests.
var soakMix = []struct {
	kind string
	n    int
}{
	{"passthrough", 30}, // 2 KB chat completion, passed through
	{"stream", 8},       // the same, streamed
	{"new-log", 32},     // a replay never seen before: a new fact index
	{"session", 15},     // one of three segments of a session, ~2000 sessions
	{"repeat-log", 13},  // one of 50 replays seen before: a memory hit
	{"large-log", 1},    // a 470 KB replay never seen before
	{"trace", 1},        // GET a recent trace
}

// SoakOptions is one run of Soak; the zero value of a field is not a default
// (the factgate soak command sets them from its flags).
type SoakOptions struct {
	// ProxyBin is the factgate binary the proxy child runs as.
	ProxyBin string
	// Requests to send by Concurrency connections, the proxy's memory printed
	// every ReportEvery of them; MaxTime stops the run sooner.
	Requests, Concurrency, ReportEvery int
	MaxTime                            time.Duration
	// FactsMemory, CacheMemory and TracesMemory are the proxy's
	// facts.memory_bytes, cache.memory.max_bytes and traces.memory_bytes as
	// written in its config ("": its default).
	FactsMemory, CacheMemory, TracesMemory string
	// RedisURL, when set, puts Redis behind the proxy's memory cache, under a
	// key prefix of this run.
	RedisURL string
	// Settle, when positive, measures again once the proxy has been idle this
	// long.
	Settle time.Duration
	// Corpus is the sample the requests and the mock's answers are made of.
	Corpus Corpus
}

// Soak starts the mock upstream in this process and the proxy as a child,
// drives the soak mix at it, and writes the proxy's memory as it goes and
// against its budget at the end to stdout. An error is one that stopped the
// run before its table.
func Soak(ctx context.Context, o SoakOptions, stdout io.Writer) error {
	mock := mockupstream.New(mockupstream.Options{Script: benchScript(o.Corpus.CleanAnswer), ChunkSize: 16})
	if err := mock.Start("127.0.0.1:0"); err != nil {
		return fmt.Errorf("starting the mock upstream: %w", err)
	}
	defer mock.Close()

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	var factsBlock, cacheBlock, tracesBlock string
	if o.FactsMemory != "" {
		factsBlock = fmt.Sprintf("    facts:\n      memory_bytes: %s\n", o.FactsMemory)
	}
	if o.CacheMemory != "" || o.RedisURL != "" {
		cacheBlock = "cache:\n"
		if o.CacheMemory != "" {
			cacheBlock += fmt.Sprintf("  memory:\n    max_bytes: %s\n", o.CacheMemory)
		}
		if o.RedisURL != "" {
			cacheBlock += fmt.Sprintf("  redis:\n    url: %q\n    key_prefix: \"factgate:soak:%d:\"\n", o.RedisURL, os.Getpid())
		}
	}
	if o.TracesMemory != "" {
		tracesBlock = fmt.Sprintf("traces:\n  memory_bytes: %s\n", o.TracesMemory)
	}
	child, err := startChildProxy(ctx, o.ProxyBin, addr, fmt.Sprintf(soakConfig, addr, mock.URL(), factsBlock, cacheBlock, tracesBlock))
	if err != nil {
		return err
	}
	defer child.stop()
	pid := child.cmd.Process.Pid

	fmt.Fprintf(stdout, "factgate soak: %d requests, concurrency %d, proxy %s (pid %d, %s)\n", o.Requests, o.Concurrency, addr, pid, o.ProxyBin)
	var mix []string
	for _, m := range soakMix {
		mix = append(mix, fmt.Sprintf("%s %d%%", m.kind, m.n))
	}
	fmt.Fprintf(stdout, "mix: %s\n", strings.Join(mix, ", "))
	if b, ok := scrapeMemoryBudget(addr); ok {
		fmt.Fprintf(stdout, "memory budget: %s\n\n", b)
	} else {
		fmt.Fprintf(stdout, "memory budget: not reported by this proxy (an older build); flags: facts %q, cache %q, traces %q\n\n", o.FactsMemory, o.CacheMemory, o.TracesMemory)
	}
	fmt.Fprintf(stdout, "%9s %8s %7s %10s %10s %10s %10s %10s\n", "requests", "seconds", "errors", "RSS", "heap", "facts", "cache", "traces")

	d := newSoakDriver(addr, o.Concurrency, o.Corpus.Replay)
	start := time.Now()
	deadline := start.Add(o.MaxTime)
	for sent := 0; sent < o.Requests && ctx.Err() == nil && time.Now().Before(deadline); {
		n := min(o.ReportEvery, o.Requests-sent)
		d.run(ctx, sent, n, deadline)
		sent += n
		// The requests really sent: a run cut short by --max-time sent fewer than n.
		fmt.Fprintf(stdout, "%9d %8.0f %7d %s\n", d.done.Load(), time.Since(start).Seconds(), d.errors.Load(), soakMemoryLine(pid, addr))
	}
	elapsed := time.Since(start)
	done := d.done.Load()
	fmt.Fprintf(stdout, "\n%d requests in %.0fs (%.0f/s), %d errors\n", done, elapsed.Seconds(), float64(done)/elapsed.Seconds(), d.errors.Load())
	if first, ok := d.firstErr.Load().(string); ok {
		fmt.Fprintf(stdout, "first error: %s\n", first)
	}
	m := scrapeMetrics(addr)
	fmt.Fprintf(stdout, "garbage collections: %.0f, %.1fs of pauses\n", m["go_gc_duration_seconds_count"], m["go_gc_duration_seconds_sum"])
	printProxyMemory(stdout, pid, addr)
	if o.Settle > 0 && ctx.Err() == nil {
		time.Sleep(o.Settle)
		fmt.Fprintf(stdout, "\nafter %v idle: %s\n", o.Settle, soakMemoryLine(pid, addr))
		printProxyMemory(stdout, pid, addr)
	}
	return nil
}

// soakDriver sends the soak mix.
type soakDriver struct {
	client   *fasthttp.HostClient
	addr     string
	parts    [3]string
	replay   string // the sample replay (Corpus.Replay)
	done     atomic.Int64
	errors   atomic.Int64
	firstErr atomic.Value
	traceID  atomic.Value
}

func newSoakDriver(addr string, concurrency int, replay string) *soakDriver {
	d := &soakDriver{
		addr:   addr,
		replay: replay,
		client: &fasthttp.HostClient{Addr: addr, MaxConns: concurrency, ReadTimeout: 60 * time.Second, WriteTimeout: 10 * time.Second},
	}
	lines := strings.SplitAfter(replay, "\n")
	third := len(lines) / 3
	d.parts = [3]string{
		strings.Join(lines[:third], ""),
		strings.Join(lines[third:2*third], ""),
		strings.Join(lines[2*third:], ""),
	}
	return d
}

// run sends requests first..first+n-1 with the driver's concurrency.
func (d *soakDriver) run(ctx context.Context, first, n int, deadline time.Time) {
	var next atomic.Int64
	next.Store(int64(first))
	var wg sync.WaitGroup
	for range d.client.MaxConns {
		wg.Go(func() {
			req := fasthttp.AcquireRequest()
			resp := fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for {
				i := int(next.Add(1) - 1)
				if i >= first+n || ctx.Err() != nil || time.Now().After(deadline) {
					return
				}
				d.one(i, req, resp)
			}
		})
	}
	wg.Wait()
}

// one sends request i of the mix.
func (d *soakDriver) one(i int, req *fasthttp.Request, resp *fasthttp.Response) {
	req.Reset()
	req.Header.Set("Authorization", "Bearer soak")
	kind := soakKind(i)
	if kind == "trace" {
		id, _ := d.traceID.Load().(string)
		req.Header.SetMethod("GET")
		req.SetRequestURI("http://" + d.addr + "/factgate/v1/traces/" + id)
	} else {
		req.Header.SetMethod("POST")
		req.SetRequestURI("http://" + d.addr + "/v1/chat/completions")
		req.Header.SetContentType("application/json")
		body, session := d.body(i, kind)
		if session != "" {
			req.Header.Set("X-Factgate-Session", session)
		}
		req.SetBodyRaw(body)
	}
	err := d.client.Do(req, resp)
	d.done.Add(1)
	switch {
	case err != nil:
	case kind == "trace" && (resp.StatusCode() == 200 || resp.StatusCode() == 404):
		return // a trace may have left the trace tier: 404 is an answer
	case resp.StatusCode() != 200:
		err = fmt.Errorf("%s: status %d: %.200s", kind, resp.StatusCode(), resp.Body())
	default:
		if id := resp.Header.Peek("X-Factgate-Trace-Id"); len(id) > 0 {
			d.traceID.Store(string(id))
		}
		return
	}
	d.errors.Add(1)
	d.firstErr.CompareAndSwap(nil, err.Error())
}

// soakKind returns the kind of request i.
func soakKind(i int) string {
	r := i % 100
	for _, m := range soakMix {
		if r < m.n {
			return m.kind
		}
		r -= m.n
	}
	return soakMix[0].kind
}

// body builds request i of kind, and its session id ("" for none).
func (d *soakDriver) body(i int, kind string) ([]byte, string) {
	var text, session string
	switch kind {
	case "passthrough":
		return benchBody(benchMode{name: "passthrough", model: "soak"}, 2048, d.replay), ""
	case "stream":
		return benchBody(benchMode{name: "stream", model: "soak", stream: true}, 2048, d.replay), ""
	case "new-log":
		text = "分析这局录像。\n\n" + d.replay + "\n# 请求 " + strconv.Itoa(i)
	case "repeat-log":
		text = "分析这局录像。\n\n" + d.replay + "\n# 常见录像 " + strconv.Itoa(i%50)
	case "large-log":
		text = "分析这局录像。\n\n" + strings.Repeat(d.replay, 20) + "\n# 大录像 " + strconv.Itoa(i)
	case "session":
		s := (i / 100) % 2000
		part := (i / 7) % 3
		session = "soak-" + strconv.Itoa(s)
		text = d.parts[part] + "\n# 会话 " + strconv.Itoa(s) + " 段 " + strconv.Itoa(part)
	}
	b, _ := json.Marshal(map[string]any{
		"model":    "soak-validate",
		"messages": []map[string]string{{"role": "system", "content": "你是红警 3 录像分析助手。"}, {"role": "user", "content": text}},
	})
	return b, session
}

// soakMemoryLine renders the proxy's RSS and memory tiers for the progress table.
func soakMemoryLine(pid int, addr string) string {
	rss, _, _ := processRSS(pid)
	m := scrapeMetrics(addr)
	mib := func(v float64, ok bool) string {
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%.1fMiB", v/(1<<20))
	}
	heap, okHeap := m["go_memstats_heap_inuse_bytes"]
	facts, okFacts := m["factgate_fact_index_memory_bytes"]
	cacheBytes, okCache := m["factgate_cache_memory_bytes"]
	traces, okTraces := m["factgate_traces_memory_bytes"]
	return fmt.Sprintf("%10s %10s %10s %10s %10s", strings.TrimSuffix(rss, " kB")+"kB", mib(heap, okHeap), mib(facts, okFacts), mib(cacheBytes, okCache), mib(traces, okTraces))
}

// printProxyMemory prints the proxy's RSS and peak RSS, and its memory budget when
// it reports one (factgate_memory_budget_bytes), with how RSS compares.
func printProxyMemory(w io.Writer, pid int, addr string) {
	rss, hwm, err := processRSS(pid)
	if err != nil {
		return
	}
	fmt.Fprintf(w, "proxy memory after the run: RSS %s, peak RSS %s\n", rss, hwm)
	b, ok := scrapeMemoryBudget(addr)
	if !ok {
		return
	}
	fmt.Fprintf(w, "proxy memory budget: %s\n", b)
	limit := b.budgets + proxy.RSSAllowance
	for _, m := range []struct{ name, kB string }{{"RSS", rss}, {"peak RSS", hwm}} {
		kb, err := strconv.ParseInt(strings.TrimSuffix(m.kB, " kB"), 10, 64)
		if err != nil {
			continue
		}
		verdict := "within"
		if kb*1024 > limit {
			verdict = "OVER"
		}
		fmt.Fprintf(w, "%s %.1f MB is %s the budgets + 48 MB (%.1f MB)\n", m.name, float64(kb)*1024/1e6, verdict, float64(limit)/1e6)
	}
}

// soakBudget is a proxy's factgate_memory_budget_bytes.
type soakBudget struct {
	parts   map[string]int64
	budgets int64 // every part but the runtime allowance
}

func (b soakBudget) String() string {
	var parts []string
	for _, p := range []string{"facts", "cache", "traces", "pending"} {
		if v := b.parts[p]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", p, units.ByteSize(v)))
		}
	}
	return fmt.Sprintf("%s = %s configured (+ %s runtime allowance)", strings.Join(parts, " + "), units.ByteSize(b.budgets), units.ByteSize(b.parts["runtime"]))
}

// scrapeMemoryBudget reads factgate_memory_budget_bytes from the proxy's /metrics.
func scrapeMemoryBudget(addr string) (soakBudget, bool) {
	b := soakBudget{parts: map[string]int64{}}
	for name, v := range scrapeMetrics(addr) {
		part, ok := strings.CutPrefix(name, `factgate_memory_budget_bytes{part="`)
		if !ok {
			continue
		}
		part = strings.TrimSuffix(part, `"}`)
		b.parts[part] = int64(v)
		if part != "runtime" {
			b.budgets += int64(v)
		}
	}
	return b, len(b.parts) > 0
}

// scrapeMetrics reads the proxy's /metrics into name{labels} -> value; series of
// one name with one label (route) are also summed under the bare name.
func scrapeMetrics(addr string) map[string]float64 {
	out := map[string]float64{}
	status, body, err := fasthttp.GetTimeout(nil, "http://"+addr+"/metrics", 5*time.Second)
	if err != nil || status != 200 {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		out[name] = v
		if j := strings.IndexByte(name, '{'); j > 0 && !strings.HasPrefix(name, "factgate_memory_budget_bytes") {
			out[name[:j]] += v
		}
	}
	return out
}
