package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/mockupstream"
)

func init() {
	register("bench", "measure the proxy against calling the mock upstream directly", runBench)
}

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
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	requests := fs.Int("requests", 20000, "requests per target per round")
	concurrency := fs.Int("concurrency", 50, "concurrent client connections")
	rounds := fs.Int("rounds", 3, "rounds; each round measures direct, then through the proxy")
	bodySize := fs.Int("body-size", 2048, "request body size in bytes")
	modes := fs.String("modes", "passthrough,stream", "comma-separated: passthrough, stream, validate")
	maxTime := fs.Duration("max-time", 2*time.Minute, "stop a measurement after this long")
	accessLog := fs.Bool("access-log", false, "keep the proxy's per-request access log on")
	inProcess := fs.Bool("in-process", false, "run the proxy in this process instead of as a child (no memory figure)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: factgate bench [flags]")
		fmt.Fprintln(stderr, "\nStarts the mock upstream in this process and the proxy as a child process")
		fmt.Fprintln(stderr, "(factgate serve), then drives the same requests at the mock directly and through")
		fmt.Fprintln(stderr, "the proxy, alternating, and prints requests/s, p50/p90/p99 and the ratio")
		fmt.Fprintln(stderr, "proxy/direct. All traffic stays on 127.0.0.1 and is bounded in count and time.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	var selected []benchMode
	for _, m := range strings.Split(*modes, ",") {
		bm, ok := benchModes[strings.TrimSpace(m)]
		if !ok {
			fmt.Fprintf(stderr, "factgate bench: unknown mode %q (passthrough, stream, validate)\n", m)
			return 2
		}
		selected = append(selected, bm)
	}
	if *requests <= 0 || *concurrency <= 0 || *rounds <= 0 || *bodySize < 64 {
		fmt.Fprintln(stderr, "factgate bench: --requests, --concurrency and --rounds must be positive and --body-size at least 64")
		return 2
	}

	mock := mockupstream.New(mockupstream.Options{Script: benchScript(), ChunkSize: 16})
	if err := mock.Start("127.0.0.1:0"); err != nil {
		fmt.Fprintln(stderr, "factgate bench: starting the mock upstream:", err)
		return 1
	}
	defer mock.Close()

	var child *benchChild
	var proxyAddr string
	if *inProcess {
		addr, stop, err := startInProcessProxy(mock.URL(), *accessLog)
		if err != nil {
			fmt.Fprintln(stderr, "factgate bench:", err)
			return 1
		}
		defer stop()
		proxyAddr = addr
	} else {
		c, addr, err := startBenchProxy(ctx, mock.URL(), *accessLog, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "factgate bench:", err)
			return 1
		}
		defer c.stop()
		child, proxyAddr = c, addr
	}

	fmt.Fprintf(stdout, "factgate bench: %d requests x %d rounds per target, concurrency %d, body %d bytes\n",
		*requests, *rounds, *concurrency, *bodySize)
	if child != nil {
		fmt.Fprintf(stdout, "mock upstream %s (in this process), proxy %s (pid %d)\n\n", mock.Addr(), proxyAddr, child.cmd.Process.Pid)
	} else {
		fmt.Fprintf(stdout, "mock upstream %s and proxy %s, both in this process\n\n", mock.Addr(), proxyAddr)
	}
	fmt.Fprintf(stdout, "%-12s %-7s %10s %9s %9s %9s %8s\n", "mode", "target", "req/s", "p50", "p90", "p99", "errors")

	for _, m := range selected {
		body := benchBody(m, *bodySize)
		directModel := body
		targets := []struct{ name, addr, path string }{
			{"direct", mock.Addr(), "/v1/chat/completions"},
			{"proxy", proxyAddr, "/v1/chat/completions"},
		}
		// Warm both paths (connections, pools, caches).
		for _, t := range targets {
			_ = drive(ctx, t.addr, t.path, directModel, 1000, *concurrency, *maxTime)
		}
		var results [2][]benchResult
		for r := 0; r < *rounds && ctx.Err() == nil; r++ {
			for i, t := range targets {
				res := drive(ctx, t.addr, t.path, body, *requests, *concurrency, *maxTime)
				results[i] = append(results[i], res)
			}
		}
		var rps [2]float64
		for i, t := range targets {
			merged := mergeResults(results[i])
			rps[i] = merged.rps()
			fmt.Fprintf(stdout, "%-12s %-7s %10.0f %9s %9s %9s %8d\n", m.name, t.name, rps[i],
				fmtLatency(merged.percentile(50)), fmtLatency(merged.percentile(90)), fmtLatency(merged.percentile(99)), merged.errors)
			if merged.errors > 0 && merged.firstErr != "" {
				fmt.Fprintf(stdout, "%-12s first error: %s\n", "", merged.firstErr)
			}
		}
		if rps[0] > 0 {
			fmt.Fprintf(stdout, "%-12s ratio proxy/direct: %.2fx\n\n", m.name, rps[1]/rps[0])
		}
	}
	if child == nil {
		return 0
	}
	printProxyMemory(stdout, child.cmd.Process.Pid, proxyAddr)
	return 0
}

// benchCleanAnswer is a correct analysis of the sample replay with seven unit
// claims, one event and one timeline claim: validation finds nothing to revise,
// so the validating route makes exactly one upstream call.
//
//go:embed demodata/clean_answer.md
var benchCleanAnswer string

// benchScript answers a request carrying an operation log with the clean
// analysis, and every other chat completion with a fixed ~300-byte answer.
func benchScript() *mockupstream.Script {
	s := &mockupstream.Script{
		Rules: []mockupstream.Rule{{
			Name:   "analysis",
			Match:  mockupstream.Match{LastUser: `\[操作记录\]`},
			Answer: &mockupstream.Answer{Content: benchCleanAnswer, Usage: &mockupstream.Usage{PromptTokens: 9000, CompletionTokens: 900}},
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
func benchBody(m benchMode, size int) []byte {
	if m.name == "validate" {
		b, _ := json.Marshal(map[string]any{
			"model":       m.model,
			"temperature": 0.35,
			"messages": []map[string]string{
				{"role": "system", "content": "你是红警 3 录像分析助手。"},
				{"role": "user", "content": "分析这局录像。\n\n" + demoReplay},
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
	elapsed  time.Duration
	lat      []time.Duration
}

func (r benchResult) rps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.n) / r.elapsed.Seconds()
}

// percentile is the p-th percentile of the latencies (nearest rank).
func (r benchResult) percentile(p float64) time.Duration { return interceptors.Percentile(r.lat, p) }

func mergeResults(rs []benchResult) benchResult {
	var m benchResult
	for _, r := range rs {
		m.n += r.n
		m.errors += r.errors
		m.elapsed += r.elapsed
		m.lat = append(m.lat, r.lat...)
		if m.firstErr == "" {
			m.firstErr = r.firstErr
		}
	}
	return m
}

// drive sends n requests at concurrency c and measures them.
func drive(ctx context.Context, addr, path string, body []byte, n, c int, maxTime time.Duration) benchResult {
	client := &fasthttp.HostClient{Addr: addr, MaxConns: c, ReadTimeout: 30 * time.Second, WriteTimeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var errs atomic.Int64
	var firstErr atomic.Value
	lat := make([]time.Duration, n)
	deadline := time.Now().Add(maxTime)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := fasthttp.AcquireRequest()
			resp := fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.Header.SetMethod("POST")
			req.SetRequestURI("http://" + addr + path)
			req.Header.SetContentType("application/json")
			req.Header.Set("Authorization", "Bearer bench")
			req.SetBodyRaw(body)
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil || time.Now().After(deadline) {
					return
				}
				t0 := time.Now()
				err := client.Do(req, resp)
				lat[i] = time.Since(t0)
				if err == nil && resp.StatusCode() != 200 {
					err = fmt.Errorf("status %d: %.200s", resp.StatusCode(), resp.Body())
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
	return r
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

// benchChild is the proxy under test, running as "factgate serve".
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

// startBenchProxy writes a bench config and starts "factgate serve" on it.
func startBenchProxy(ctx context.Context, mockURL string, accessLog bool, stderr io.Writer) (*benchChild, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	child, err := startChildProxy(ctx, exe, addr, fmt.Sprintf(benchConfig, addr, accessLog, mockURL))
	return child, addr, err
}

// startChildProxy writes cfg (listening on addr) and starts "exe serve" on it.
func startChildProxy(ctx context.Context, exe, addr, cfg string) (*benchChild, error) {
	dir, err := os.MkdirTemp("", "factgate-bench-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "serve", "--config", path)
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
