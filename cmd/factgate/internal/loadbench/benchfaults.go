package loadbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// faultScenario is one measurement of bench-faults: a mock script, the proxy's
// upstreams and routes, and what counts as a good answer.
type faultScenario struct {
	name string
	// script answers the requests; nil is the plain answer.
	script *mockupstream.Script
	// upstreams and route are the proxy config's blocks; %MOCK% and %DEAD% are
	// the mock's base URL and one that refuses connections.
	upstreams, route string
	// revised: a good answer is the hidden revision's corrected answer, not any 200.
	revised bool
}

// FaultOptions is one run of Faults; the zero value of a field is not a
// default (the factgate bench-faults command sets them from its flags).
type FaultOptions struct {
	// Requests per scenario, sent by Concurrency connections.
	Requests, Concurrency int
	// Rate is the share of upstream calls answered 429; Seed picks which (the
	// mock's random_fault seed).
	Rate float64
	Seed uint64
	// Corpus is the sample the revision scenarios' requests and answers are
	// made of.
	Corpus Corpus
}

// Faults runs the mock upstream and the proxy in this process and writes, per
// scenario (a provider that rate-limits a share of the calls, a primary that
// refuses connections), the share of requests answered well and the latency
// the client sees to stdout. An error names the scenario it stopped at.
func Faults(ctx context.Context, o FaultOptions, stdout io.Writer) error {
	fmt.Fprintf(stdout, "factgate bench-faults: %d requests per scenario, concurrency %d, 429 rate %.0f%% (seed %d)\n\n", o.Requests, o.Concurrency, o.Rate*100, o.Seed)
	fmt.Fprintf(stdout, "%-56s %8s %9s %9s %9s %9s %7s\n", "scenario", "good", "p50", "p90", "p99", "mean", "calls")
	for _, sc := range faultScenarios(o.Rate, o.Seed, o.Corpus) {
		if ctx.Err() != nil {
			break
		}
		res, calls, err := runFaultScenario(ctx, sc, o.Requests, o.Concurrency, o.Corpus)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		fmt.Fprintf(stdout, "%-56s %7.1f%% %9s %9s %9s %9s %7d\n", sc.name, 100*float64(res.n-res.errors)/float64(max(res.n, 1)),
			fmtLatency(res.percentile(50)), fmtLatency(res.percentile(90)), fmtLatency(res.percentile(99)), fmtLatency(res.mean()), calls)
		if res.errors > 0 && res.firstErr != "" {
			fmt.Fprintf(stdout, "%-56s first miss: %.120s\n", "", res.firstErr)
		}
	}
	return nil
}

// faultScenarios are the measurements, in the order README shows them.
func faultScenarios(rate float64, seed uint64, corpus Corpus) []faultScenario {
	limited := func(answer mockupstream.Answer, hint map[string]string) *mockupstream.RandomFault {
		return &mockupstream.RandomFault{Rate: rate, Seed: seed, Answer: mockupstream.Answer{Fault: &mockupstream.Fault{
			Status: 429, Headers: hint, Body: `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`}}}
	}
	plain := mockupstream.Answer{Content: "fine", Usage: &mockupstream.Usage{PromptTokens: 512, CompletionTokens: 64}}
	flaky := func(hint map[string]string) *mockupstream.Script {
		return &mockupstream.Script{Rules: []mockupstream.Rule{{Name: "flaky", Answer: &plain, RandomFault: limited(plain, hint)}}}
	}
	flakyStory := func() *mockupstream.Script {
		rules := corpus.RevisionRules()
		for i := range rules {
			rules[i].RandomFault = limited(*rules[i].Answer, nil)
		}
		return &mockupstream.Script{Rules: rules}
	}
	const mock = "  mock: {base_url: \"%%MOCK%%\", max_concurrent: 4096, retry: %s}\n"
	const plainRoute = "  - {name: bench, default: true, upstream: mock}\n"
	const storyRoute = "  - {name: bench, default: true, upstream: mock, upstream_model: deepseek-chat, pack: ra3, inject: {}, validate: {}, revise: {}}\n"
	const fallbackRoute = "  - {name: bench, default: true, upstreams: [dead, mock]}\n"
	dead := func(breaker string) string {
		return "  dead: {base_url: \"%DEAD%\", breaker: " + breaker + "}\n" + fmt.Sprintf(mock, "{}")
	}
	return []faultScenario{
		{name: "no faults (baseline)", upstreams: fmt.Sprintf(mock, "{}"), route: plainRoute},
		{name: "429 on a share, retries off", script: flaky(nil), upstreams: fmt.Sprintf(mock, "{max_retries: 0}"), route: plainRoute},
		{name: "429 on a share, retries 2 (default: 250ms, full jitter)", script: flaky(nil), upstreams: fmt.Sprintf(mock, "{}"), route: plainRoute},
		{name: "429 on a share with retry-after-ms: 50, retries 2", script: flaky(map[string]string{"retry-after-ms": "50"}), upstreams: fmt.Sprintf(mock, "{}"), route: plainRoute},
		{name: "429 on a share, retries 4", script: flaky(nil), upstreams: fmt.Sprintf(mock, "{max_retries: 4}"), route: plainRoute},
		{name: "held + revision, 429 on a share, retries off", script: flakyStory(), upstreams: fmt.Sprintf(mock, "{max_retries: 0}"), route: storyRoute, revised: true},
		{name: "held + revision, 429 on a share, retries 2", script: flakyStory(), upstreams: fmt.Sprintf(mock, "{}"), route: storyRoute, revised: true},
		{name: "primary refuses connections, breaker on (default)", upstreams: dead("{}"), route: fallbackRoute},
		{name: "primary refuses connections, breaker off", upstreams: dead("{failures: 0}"), route: fallbackRoute},
	}
}

// runFaultScenario serves one scenario and drives n requests through it.
func runFaultScenario(ctx context.Context, sc faultScenario, n, c int, corpus Corpus) (faultResult, int, error) {
	mock := mockupstream.New(mockupstream.Options{Script: sc.script, Record: true})
	if err := mock.Start("127.0.0.1:0"); err != nil {
		return faultResult{}, 0, err
	}
	defer mock.Close()
	addr, err := freeAddr()
	if err != nil {
		return faultResult{}, 0, err
	}
	deadURL, err := refusingURL()
	if err != nil {
		return faultResult{}, 0, err
	}
	upstreams := strings.NewReplacer("%MOCK%", mock.URL(), "%DEAD%", deadURL).Replace(sc.upstreams)
	config := fmt.Sprintf("server: {listen: %q, drain_grace: 0s, keepalive_interval: 60s}\nlog: {level: error, access: false}\nupstreams:\n%sroutes:\n%s", addr, upstreams, sc.route)
	cfg, err := proxy.ParseConfig([]byte(config), "bench-faults")
	if err != nil {
		return faultResult{}, 0, err
	}
	srv, err := proxy.New(cfg, proxy.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return faultResult{}, 0, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return faultResult{}, 0, err
	}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	body := faultRequest(sc.revised, corpus)
	good := func(resp *fasthttp.Response) bool { return resp.StatusCode() == 200 }
	if sc.revised {
		// Revised: the answer returned has no issue left (the draft had two).
		good = func(resp *fasthttp.Response) bool {
			return resp.StatusCode() == 200 && slices.Contains(strings.Split(string(resp.Header.Peek("X-Factgate-Issues")), ";"), "final=0")
		}
	}
	res := driveFaults(ctx, addr, body, n, c, good)
	return res, len(mock.Requests()), nil
}

// refusingURL is a base URL on a port nothing listens on.
func refusingURL() (string, error) {
	addr, err := freeAddr()
	if err != nil {
		return "", err
	}
	return "http://" + addr + "/v1", nil
}

// faultRequest is a small chat completion, or the demo's replay analysis that the
// story's draft answers (revised).
func faultRequest(revised bool, corpus Corpus) []byte {
	if !revised {
		return []byte(`{"model":"bench-model","messages":[{"role":"user","content":"ping"}]}`)
	}
	b, _ := json.Marshal(map[string]any{
		"model":    "bench",
		"messages": []map[string]string{{"role": "user", "content": corpus.Ask + "\n\n" + corpus.Replay}},
	})
	return b
}

// faultResult is what the client saw in one scenario.
type faultResult struct{ benchResult }

func (r faultResult) mean() time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range r.lat {
		sum += d
	}
	return sum / time.Duration(len(r.lat))
}

// driveFaults sends n requests at concurrency c; a request counts as an error
// unless good says otherwise.
func driveFaults(ctx context.Context, addr string, body []byte, n, c int, good func(*fasthttp.Response) bool) faultResult {
	client := &fasthttp.HostClient{Addr: addr, MaxConns: c, ReadTimeout: 2 * time.Minute, WriteTimeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var next, errs atomic.Int64
	var firstErr atomic.Value
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.Header.SetMethod("POST")
			req.SetRequestURI("http://" + addr + "/v1/chat/completions")
			req.Header.SetContentType("application/json")
			req.SetBodyRaw(body)
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := client.Do(req, resp)
				lat[i] = time.Since(t0)
				if err == nil && !good(resp) {
					err = fmt.Errorf("status %d, X-Factgate-Issues %q: %s", resp.StatusCode(), resp.Header.Peek("X-Factgate-Issues"), resp.Body())
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
	r := faultResult{benchResult{n: done, errors: int(errs.Load()), elapsed: time.Since(start), lat: slices.Clone(lat[:done])}}
	if v, ok := firstErr.Load().(string); ok {
		r.firstErr = v
	}
	return r
}
