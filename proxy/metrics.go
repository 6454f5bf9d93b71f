package proxy

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/factgate/factgate/interceptors/validate"
)

// metrics are the proxy's Prometheus metrics. Every series is labelled by route;
// the per-route observers are resolved once per route, not per request.
type metrics struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec   // route, code
	duration *prometheus.HistogramVec // route: whole request
	upstream *prometheus.HistogramVec // route: time waiting for the upstream
	overhead *prometheus.HistogramVec // route: time spent in the proxy
	inFlight prometheus.Gauge
	errors   *prometheus.CounterVec // route, kind

	attempts     *prometheus.CounterVec // upstream, outcome: every try of an upstream call
	circuitOpen  *prometheus.GaugeVec   // upstream: 1 while its circuit breaker is open
	keyCooldowns *prometheus.CounterVec // upstream, key (the env var): pool keys left out
	rateLimited  *prometheus.CounterVec // client, limit (requests, tokens): requests refused
	// shutdownUnwritten: kind (counters, traces, fact_indexes, sessions): writes
	// Redis did not take before the shutdown deadline.
	shutdownUnwritten *prometheus.CounterVec
}

// latencyBuckets span sub-millisecond proxy overhead to minute-long completions.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_requests_total", Help: "Requests served, by route and HTTP status (499: the client went away).",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "factgate_request_duration_seconds", Help: "Whole request latency as the client sees it.", Buckets: latencyBuckets,
		}, []string{"route"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "factgate_upstream_duration_seconds", Help: "Time spent waiting for upstream calls (all calls of a request).", Buckets: latencyBuckets,
		}, []string{"route"}),
		overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "factgate_proxy_overhead_seconds", Help: "Time spent in the proxy itself, excluding upstream calls.", Buckets: latencyBuckets,
		}, []string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "factgate_in_flight_requests", Help: "Requests being served.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_errors_total", Help: "Errors by kind (invalid_json, unauthorized, upstream_timeout, client_closed_request, ...).",
		}, []string{"route", "kind"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_upstream_attempts_total", Help: "Tries of upstream calls, retries and fallbacks included, by upstream and outcome (ok, client_error, unauthorized, rate_limited, server_error, connect_error, timeout, failed, saturated, cancelled, circuit_open, keys_cooling).",
		}, []string{"upstream", "outcome"}),
		circuitOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "factgate_upstream_circuit_open", Help: "1 while the upstream's circuit breaker is open (no calls but one probe after the cooldown), else 0.",
		}, []string{"upstream"}),
		keyCooldowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_upstream_key_cooldowns_total", Help: "Times a pool key was left out after the provider answered 401 or 429, by upstream and key (its environment variable).",
		}, []string{"upstream", "key"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_rate_limited_total", Help: "Requests refused with 429 by a client key's rate limit, by client and limit (requests, tokens).",
		}, []string{"client", "limit"}),
		shutdownUnwritten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_shutdown_unwritten_total", Help: "Writes kept while Redis failed that the shutdown could not write before its deadline, by kind (counters, traces, fact_indexes, sessions); each is also in the shutdown's WARN line.",
		}, []string{"kind"}),
	}
	reg.MustRegister(m.requests, m.duration, m.upstream, m.overhead, m.inFlight, m.errors,
		m.attempts, m.circuitOpen, m.keyCooldowns, m.rateLimited, m.shutdownUnwritten,
		validate.RuleErrors, // factgate_rule_errors_total: the packs' rules count their failures there
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// routeMetrics are one route's resolved observers.
type routeMetrics struct {
	m        *metrics
	name     string
	duration prometheus.Observer
	upstream prometheus.Observer
	overhead prometheus.Observer
	ok       prometheus.Counter // code 200, the common case
}

func (m *metrics) forRoute(name string) *routeMetrics {
	return &routeMetrics{
		m:        m,
		name:     name,
		duration: m.duration.WithLabelValues(name),
		upstream: m.upstream.WithLabelValues(name),
		overhead: m.overhead.WithLabelValues(name),
		ok:       m.requests.WithLabelValues(name, "200"),
	}
}

// observe records one finished request.
func (rm *routeMetrics) observe(status int, total, upstream time.Duration) {
	if status == 200 {
		rm.ok.Inc()
	} else {
		rm.m.requests.WithLabelValues(rm.name, strconv.Itoa(status)).Inc()
	}
	rm.duration.Observe(total.Seconds())
	if upstream > 0 {
		rm.upstream.Observe(upstream.Seconds())
	}
	over := total - upstream
	if over < 0 {
		over = 0
	}
	rm.overhead.Observe(over.Seconds())
}

func (rm *routeMetrics) error(kind string) {
	rm.m.errors.WithLabelValues(rm.name, kind).Inc()
}
