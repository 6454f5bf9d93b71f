package loadbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// factgate bench --tracing: a second proxy child with the telemetry block on,
// every request sampled, exporting its spans over OTLP/HTTP — to a collector the
// operator names (--otlp-endpoint), or to a receiver in the load driver that
// decodes each export and counts its spans, so that the collector is always up
// and answers at once.

// tracedProxy is the proxy child that traces, and where its spans go.
type tracedProxy struct {
	child    *benchChild
	addr     string
	endpoint string
	sink     *otlpSink // nil with --otlp-endpoint
	// sampler is the OTEL_TRACES_SAMPLER(_ARG) it runs with.
	sampler string
}

func startTracedProxy(ctx context.Context, exe, mockURL string, accessLog bool, endpoint string, ratio float64) (*tracedProxy, error) {
	tp := &tracedProxy{endpoint: endpoint, sampler: "always_on"}
	samplerEnv := []string{"OTEL_TRACES_SAMPLER=always_on"}
	if ratio < 1 {
		arg := strconv.FormatFloat(ratio, 'g', -1, 64)
		tp.sampler = "traceidratio " + arg
		samplerEnv = []string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=" + arg}
	}
	if endpoint == "" {
		sink, err := startOTLPSink()
		if err != nil {
			return nil, err
		}
		tp.sink, tp.endpoint = sink, sink.url
	}
	addr, err := freeAddr()
	if err != nil {
		tp.stop()
		return nil, err
	}
	cfg := fmt.Sprintf(benchConfig, addr, accessLog, mockURL) + "telemetry:\n  enabled: true\n"
	env := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + tp.endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=factgate-bench",
	}
	env = append(env, samplerEnv...)
	child, err := startChildProxyEnv(ctx, exe, addr, cfg, env)
	if err != nil {
		tp.stop()
		return nil, err
	}
	tp.child, tp.addr = child, addr
	return tp, nil
}

func (tp *tracedProxy) stop() {
	if tp.child != nil {
		tp.child.stop()
	}
	if tp.sink != nil {
		tp.sink.close()
	}
}

// report prints what the traced proxy exported so far: the spans the receiver
// got, and those the proxy dropped.
func (tp *tracedProxy) report(w io.Writer, mode string) {
	dropped := scrapeCounter(tp.addr, "factgate_telemetry_spans_dropped_total")
	exported := scrapeCounter(tp.addr, "factgate_telemetry_spans_exported_total")
	line := fmt.Sprintf("%-12s %s exported %.0f spans, dropped %.0f (so far)", mode, targetTraced, exported, dropped)
	if tp.sink != nil {
		line += fmt.Sprintf("; the receiver got %d exports, %.1f MB", tp.sink.exports.Load(), float64(tp.sink.bytes.Load())/1e6)
	}
	fmt.Fprintln(w, line)
}

// scrapeCounter sums the series of a counter on a proxy's /metrics (-1 when it
// cannot be read).
func scrapeCounter(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// otlpSink is an OTLP/HTTP trace receiver on 127.0.0.1 that reads every export
// and answers it as accepted, at the least cost: it does not decode the spans (a
// collector runs on a machine of its own; here it shares the cores with what is
// measured). The proxy counts the spans it exported
// (factgate_telemetry_spans_exported_total).
type otlpSink struct {
	srv            *http.Server
	url            string
	exports, bytes atomic.Int64
}

func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
	// An empty ExportTraceServiceResponse: every span accepted.
	accepted, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 64<<20))
		s.bytes.Add(n)
		s.exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(accepted)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *otlpSink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
