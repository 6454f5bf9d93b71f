package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The OpenTelemetry export proven against a real Jaeger (v2, built from its Go
// module by .ci/run: .ci/jaeger). The tests start Jaeger on free ports with an
// OTLP receiver and memory storage, send requests through factgate with the
// telemetry block on and the exporter configured by the OTEL_* environment, and
// read the traces back from Jaeger's query API. Without the binary they skip.

// jaegerVersion is the Jaeger the CI builds (.ci/jaeger/go.mod).
const jaegerVersion = "v1.75.0"

// jaegerBin finds the Jaeger binary: FACTGATE_JAEGER_BIN, else where .ci/run
// caches it.
func jaegerBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FACTGATE_JAEGER_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("FACTGATE_JAEGER_BIN=%s: %v", p, err)
		}
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	p := filepath.Join(cache, "factgate", "jaeger-"+jaegerVersion)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no Jaeger binary at %s: .ci/run builds it (cd .ci/jaeger && go build -o %s github.com/jaegertracing/jaeger/cmd/jaeger), or set FACTGATE_JAEGER_BIN", p, p)
	}
	return p
}

// jaeger is a Jaeger v2 this test started.
type jaeger struct {
	bin, config string
	otlp, query string // host:port of the OTLP/HTTP receiver and of the query API
	cmd         *exec.Cmd
	exited      chan struct{}
	logs        *syncWriter
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startJaeger starts Jaeger with an OTLP/HTTP receiver, memory storage and the
// query API, on free ports of 127.0.0.1, and waits until it answers.
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	j := &jaeger{bin: jaegerBin(t), otlp: freePort(t), query: freePort(t)}
	grpcQuery := freePort(t)
	j.config = filepath.Join(t.TempDir(), "jaeger.yaml")
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
processors:
  batch:
    timeout: 50ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, j.query, grpcQuery, j.otlp)
	if err := os.WriteFile(j.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	j.start(t)
	t.Cleanup(j.kill)
	return j
}

func (j *jaeger) start(t *testing.T) {
	t.Helper()
	j.logs = &syncWriter{w: &bytes.Buffer{}}
	j.cmd = exec.Command(j.bin, "--config", j.config)
	j.cmd.Stdout, j.cmd.Stderr = j.logs, j.logs
	if err := j.cmd.Start(); err != nil {
		t.Fatalf("starting Jaeger: %v", err)
	}
	j.exited = make(chan struct{})
	go func() { _ = j.cmd.Wait(); close(j.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + j.query + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-j.exited:
			t.Fatalf("Jaeger exited at start: %s", j.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger did not answer on %s: %s", j.query, j.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill stops Jaeger at once (SIGKILL), as a crashed collector would.
func (j *jaeger) kill() {
	if j.cmd == nil || j.cmd.Process == nil {
		return
	}
	_ = j.cmd.Process.Kill()
	<-j.exited
	j.cmd = nil
}

// jaegerSpan is a span as Jaeger's query API returns it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	ProcessID string `json:"processID"`
}

func (s jaegerSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			switch v := t.Value.(type) {
			case string:
				return v
			case float64:
				return strconv.FormatFloat(v, 'f', -1, 64)
			default:
				return fmt.Sprint(v)
			}
		}
	}
	return ""
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// jaegerTrace is one trace read back from Jaeger.
type jaegerTrace struct {
	spans    []jaegerSpan
	services map[string]string // process id → service name
	tags     map[string]map[string]string
}

// trace reads trace id from Jaeger, waiting until it holds at least minSpans
// spans (the export is batched).
func (j *jaeger) trace(t *testing.T, id string, minSpans int) jaegerTrace {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var got jaegerTrace
		resp, err := http.Get("http://" + j.query + "/api/traces/" + id)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var body struct {
				Data []struct {
					Spans     []jaegerSpan `json:"spans"`
					Processes map[string]struct {
						ServiceName string `json:"serviceName"`
						Tags        []struct {
							Key   string `json:"key"`
							Value any    `json:"value"`
						} `json:"tags"`
					} `json:"processes"`
				} `json:"data"`
			}
			if resp.StatusCode == 200 && json.Unmarshal(b, &body) == nil && len(body.Data) == 1 {
				got.spans = body.Data[0].Spans
				got.services, got.tags = map[string]string{}, map[string]map[string]string{}
				for pid, p := range body.Data[0].Processes {
					got.services[pid] = p.ServiceName
					got.tags[pid] = map[string]string{}
					for _, tg := range p.Tags {
						got.tags[pid][tg.Key] = fmt.Sprint(tg.Value)
					}
				}
			}
		}
		if len(got.spans) >= minSpans {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger has %d spans of trace %s, want at least %d", len(got.spans), id, minSpans)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (tr jaegerTrace) named(name string) []jaegerSpan {
	var out []jaegerSpan
	for _, s := range tr.spans {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	return out
}

func (tr jaegerTrace) children(parent jaegerSpan) []jaegerSpan {
	var out []jaegerSpan
	for _, s := range tr.spans {
		if s.parent() == parent.SpanID {
			out = append(out, s)
		}
	}
	return out
}

func (tr jaegerTrace) names() []string {
	var out []string
	for _, s := range tr.spans {
		out = append(out, s.OperationName)
	}
	sort.Strings(out)
	return out
}

// jaegerConfig routes ra3-analyst through the validating, revising RA3 chain and
// relay-model through a route without stages whose first upstream is down.
const jaegerConfig = `
server:
  keepalive_interval: 100ms
log: {level: warn}
upstreams:
  down: {base_url: "http://127.0.0.1:1", connect_timeout: 200ms}
  mock: {base_url: "%MOCK%", read_timeout: 5s}
routes:
  - name: ra3
    models: [ra3-analyst]
    upstream: mock
    upstream_model: deepseek-chat
    pack: ra3
    validate: {strip_claims: never}
    revise: {}
  - name: relay
    models: [relay-model]
    upstreams: [{name: down}, {name: mock}]
telemetry: {enabled: true}
`

// otelEnv points the proxy's exporter at j, as an operator would.
func otelEnv(t *testing.T, j *jaeger) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+j.otlp)
	t.Setenv("OTEL_SERVICE_NAME", "factgate-test")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=ci")
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "1000")
}

// TestJaegerTracesOfEveryKindOfRequest sends a held (validated, revised), a held
// streamed, a Responses and a relayed streamed request with a fallback through
// factgate, and reads each one's trace back from Jaeger. Not parallel: the
// exporter is configured by the environment.
func TestJaegerTracesOfEveryKindOfRequest(t *testing.T) {
	j := startJaeger(t)
	otelEnv(t, j)
	fixed := answerJSON{Content: storyFixedAnswer, Usage: map[string]int{"prompt_tokens": 9700, "completion_tokens": 420}}
	h := newHarness(t, reviseScript(answerJSON{Content: storyDraftAnswer, Usage: map[string]int{"prompt_tokens": 9000, "completion_tokens": 400}}, fixed, fixed, fixed), jaegerConfig)

	// Each kind of request, with or without a client traceparent.
	type sent struct {
		name, path, body, traceparent string
		id                            string // the trace to read: the client's, else X-Factgate-Trace-Id
		calls                         int    // GenAI call spans
	}
	responsesBody, _ := json.Marshal(map[string]any{"model": "ra3-analyst", "instructions": "你是红警 3 录像分析助手。", "input": "分析这局录像。\n\n" + replayText})
	cases := []*sent{
		{name: "held, revised", path: "/v1/chat/completions", body: storyRequest(false), traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", calls: 2},
		{name: "held stream, revised", path: "/v1/chat/completions", body: storyRequest(true), calls: 2},
		{name: "Responses, revised", path: "/v1/responses", body: string(responsesBody), calls: 2},
		{name: "relayed stream, fallback", path: "/v1/chat/completions", body: `{"model":"relay-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			traceparent: "00-5b8aa5a2d2c872e8321cf37308d69df2-051581bf3cb55c13-01", calls: 1},
	}
	for _, c := range cases {
		var hdr []string
		if c.traceparent != "" {
			hdr = []string{"traceparent", c.traceparent}
		}
		h.mock.Reset()
		status, rh, body := h.post(t, c.path, c.body, hdr...)
		if status != 200 {
			t.Fatalf("%s: status %d: %s", c.name, status, body)
		}
		c.id = rh.Get("X-Factgate-Trace-Id")
		if c.traceparent != "" {
			c.id = strings.Split(c.traceparent, "-")[1]
		}
		recs, _ := h.mock.WaitFor(c.calls, 3*time.Second)
		for _, r := range recs {
			tp := strings.Split(r.Header.Get("Traceparent"), "-")
			if len(tp) != 4 || tp[1] != c.id {
				t.Errorf("%s: the upstream got traceparent %q, want one in trace %s", c.name, r.Header.Get("Traceparent"), c.id)
			}
		}
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := j.trace(t, c.id, 2*c.calls+1)
			var servers []jaegerSpan
			for _, s := range tr.spans {
				if s.tag("span.kind") == "server" {
					servers = append(servers, s)
				}
			}
			if len(servers) != 1 || servers[0].OperationName != "POST "+c.path {
				t.Fatalf("server spans %v in %v, want one POST %s", len(servers), tr.names(), c.path)
			}
			srv := servers[0]
			if svc := tr.services[srv.ProcessID]; svc != "factgate-test" || tr.tags[srv.ProcessID]["deployment.environment.name"] != "ci" {
				t.Errorf("service %q, resource %v: want OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES", svc, tr.tags[srv.ProcessID])
			}
			if c.traceparent != "" {
				if p := srv.parent(); p != strings.Split(c.traceparent, "-")[2] {
					t.Errorf("server span's parent %q, want the client's span", p)
				}
			} else if p := srv.parent(); p != "" {
				t.Errorf("a request without traceparent: the server span has parent %q", p)
			}
			var calls []jaegerSpan
			for _, s := range tr.spans {
				if s.tag("gen_ai.operation.name") == "chat" {
					calls = append(calls, s)
				}
			}
			if len(calls) != c.calls {
				t.Fatalf("%d GenAI call spans, want %d: %v", len(calls), c.calls, tr.names())
			}
			for _, call := range calls {
				if call.tag("span.kind") != "client" || call.tag("gen_ai.provider.name") != "openai" || call.tag("gen_ai.response.id") == "" ||
					call.tag("gen_ai.usage.output_tokens") == "" || call.tag("gen_ai.response.model") == "" {
					t.Errorf("call span %s: %v", call.OperationName, call.Tags)
				}
				// One try: on the call's span; several: a span each.
				tries := tr.children(call)
				if len(tries) == 0 {
					tries = []jaegerSpan{call}
				}
				for _, try := range tries {
					if try.tag("factgate.upstream.name") == "" || try.tag("server.address") != "127.0.0.1" || (try.SpanID != call.SpanID && try.tag("http.request.method") != "POST") {
						t.Errorf("try span %v", try.Tags)
					}
				}
			}
			if c.calls == 2 { // the validating route
				kinds := []string{calls[0].tag("factgate.call.kind"), calls[1].tag("factgate.call.kind")}
				slices.Sort(kinds)
				if !slices.Equal(kinds, []string{"draft", "revision"}) {
					t.Errorf("call kinds %v", kinds)
				}
				for key, want := range map[string]string{"factgate.route": "ra3", "factgate.outcome": "resolved", "factgate.revisions": "1",
					"factgate.pack": "ra3", "factgate.issues.final": "0", "http.response.status_code": "200"} {
					if got := srv.tag(key); got != want {
						t.Errorf("server span %s = %q, want %q", key, got, want)
					}
				}
				if len(tr.named("factgate.validate")) != 2 || len(tr.named("factgate.facts")) != 1 || len(tr.named("factgate.revise")) != 1 {
					t.Errorf("stage spans: %v", tr.names())
				}
				if c.path == "/v1/responses" {
					// The chain works on the translation: its calls are chat completions.
					if calls[0].tag("openai.api.type") != "chat_completions" {
						t.Errorf("openai.api.type %q", calls[0].tag("openai.api.type"))
					}
				}
			} else { // the relay with its fallback
				call := calls[0]
				if call.tag("factgate.call.kind") != "relay" || call.tag("gen_ai.response.finish_reasons") == "" {
					t.Errorf("relayed call %v", call.Tags)
				}
				var down, up int
				for _, try := range tr.children(call) {
					switch try.tag("factgate.upstream.name") {
					case "down":
						down++
						if try.tag("error.type") != "connect_error" {
							t.Errorf("the failed try's error.type %q", try.tag("error.type"))
						}
					case "mock":
						up++
						if try.tag("factgate.upstream.fallback") != "true" {
							t.Error("the fallback try is not marked")
						}
					}
				}
				if down == 0 || up != 1 {
					t.Errorf("tries: %d to the down upstream, %d to the fallback", down, up)
				}
			}
		})
	}
}

// TestJaegerKilledMidLoadAndRestarted kills Jaeger while requests flow: none of
// them fails or slows beyond noise, the spans dropped meanwhile are counted, and
// once Jaeger is back the export resumes. Not parallel: the exporter is
// configured by the environment.
func TestJaegerKilledMidLoadAndRestarted(t *testing.T) {
	j := startJaeger(t)
	otelEnv(t, j)
	h := newHarness(t, "", jaegerConfig)

	// load sends n relayed requests from 8 clients, calls kill (when not nil) as
	// request n/2 starts, and returns the latencies of the requests that started
	// before it and after it; a failed request fails the test.
	load := func(n int, kill func()) (before, after []time.Duration) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		next := make(chan int, n)
		for i := range n {
			next <- i
		}
		close(next)
		errs := make(chan error, n)
		var killed sync.Once
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					if i == n/2 && kill != nil {
						killed.Do(kill)
					}
					start := time.Now()
					status, _, body, err := h.tryPost("/v1/chat/completions", `{"model":"relay-model","messages":[{"role":"user","content":"hi"}]}`)
					d := time.Since(start)
					if err == nil && status != 200 {
						err = fmt.Errorf("status %d: %s", status, body)
					}
					if err != nil {
						errs <- err
						continue
					}
					mu.Lock()
					if i < n/2 {
						before = append(before, d)
					} else {
						after = append(after, d)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("a request failed: %v", err)
		}
		slices.Sort(before)
		slices.Sort(after)
		return before, after
	}
	p := func(lat []time.Duration, q float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(float64(len(lat))*q))]
	}
	load(100, nil) // warm: connections, pools
	// Jaeger dies in the middle of the load: spans pile up, exports fail, and the
	// requests must not notice.
	before, during := load(800, j.kill)
	if t.Failed() {
		return
	}
	// Generous: the requests share two cores with the proxy, the mock and the
	// exporter's retries; a request that waited on the collector would take the
	// export timeout (1s) or more.
	t.Logf("%d requests before Jaeger was killed: p50 %v, p99 %v; %d after: p50 %v, p99 %v", len(before), p(before, 0.5), p(before, 0.99),
		len(during), p(during, 0.5), p(during, 0.99))
	if p99b, p99d := p(before, 0.99), p(during, 0.99); p99d > 3*p99b+250*time.Millisecond {
		t.Errorf("with Jaeger dead, p99 %v against %v before: requests wait on the collector", p99d, p99b)
	}
	if p50b, p50d := p(before, 0.5), p(during, 0.5); p50d > 3*p50b+50*time.Millisecond {
		t.Errorf("with Jaeger dead, p50 %v against %v before", p50d, p50b)
	}
	dropped := func() float64 {
		var sum float64
		for _, line := range strings.Split(h.metrics(t), "\n") {
			if strings.HasPrefix(line, "factgate_telemetry_spans_dropped_total{") {
				f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				sum += f
			}
		}
		return sum
	}
	deadline := time.Now().Add(10 * time.Second)
	for dropped() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if dropped() == 0 {
		t.Error("no span counted in factgate_telemetry_spans_dropped_total while the collector was dead")
	}
	t.Logf("spans dropped while Jaeger was dead: %v", dropped())

	j.start(t) // the same ports
	// The export resumes: a request sent now shows up in Jaeger.
	status, hdr, body := h.post(t, "/v1/chat/completions", `{"model":"relay-model","messages":[{"role":"user","content":"after the restart"}]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	// The proxy has no factgate trace for a relayed request: find it by the
	// client's traceparent.
	_ = hdr
	tid := "6e0c63257de34c92bf9efcd03927272e"
	if status, _, body := h.post(t, "/v1/chat/completions", `{"model":"relay-model","messages":[{"role":"user","content":"traced"}]}`,
		"traceparent", "00-"+tid+"-00f067aa0ba902b7-01"); status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	tr := j.trace(t, tid, 2) // the server span and the call's (one try)
	if len(tr.named("POST /v1/chat/completions")) != 1 || len(tr.named("chat relay-model")) != 1 {
		t.Errorf("after the restart: %v", tr.names())
	}
}

// metrics is the proxy's /metrics page.
func (h *harness) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(h.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
