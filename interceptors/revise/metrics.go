package revise

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/interceptors"
)

// metrics are the revision's Prometheus metrics, shared by every route (labelled
// by route and A/B variant; variant is "" on a route without an experiment).
type metrics struct {
	revisions *prometheus.CounterVec   // route, outcome
	attempts  *prometheus.HistogramVec // route
	tokens    *prometheus.CounterVec   // route
	final     *prometheus.CounterVec   // route, severity
}

// routeMetrics are the metrics of one route's revision step. The attempts
// histogram of its answers without an A/B variant, observed for every validated
// answer, is kept after its first use: a label lookup takes the vector's lock,
// which every request of every route shares.
type routeMetrics struct {
	*metrics
	route    string
	attempts atomic.Pointer[prometheus.Observer] // variant ""
}

// observe records one validated answer of the route.
func (rm *routeMetrics) observe(variant, outcome string, calls int, tokens int64, final interceptors.SeverityCounts) {
	if variant != "" {
		rm.metrics.observe(rm.route, variant, outcome, calls, tokens, final)
		return
	}
	o := rm.attempts.Load()
	if o == nil {
		h := rm.metrics.attempts.WithLabelValues(rm.route, "")
		o = &h
		rm.attempts.Store(o)
	}
	rm.record(rm.route, variant, outcome, *o, calls, tokens, final)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		revisions: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_revisions_total",
			Help: "Answers that triggered the hidden revision, by how it ended (resolved, improved, downgraded, failed).",
		}, []string{"route", "variant", "outcome"})),
		attempts: interceptors.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "factgate_revision_attempts",
			Help:    "Hidden revision and repair calls per validated answer (0: the draft was accepted).",
			Buckets: []float64{0, 1, 2, 3, 4, 6, 10},
		}, []string{"route", "variant"})),
		tokens: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_revision_tokens_total",
			Help: "Tokens (prompt and completion) spent on hidden revision and repair calls.",
		}, []string{"route", "variant"})),
		final: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_final_issues_total",
			Help: "Issues left in the answers returned to clients, by severity.",
		}, []string{"route", "variant", "severity"})),
	}
}

// observe records one validated answer.
func (m *metrics) observe(route, variant, outcome string, calls int, tokens int64, final interceptors.SeverityCounts) {
	m.record(route, variant, outcome, m.attempts.WithLabelValues(route, variant), calls, tokens, final)
}

// record is observe with the attempts histogram of route and variant resolved.
func (m *metrics) record(route, variant, outcome string, attempts prometheus.Observer, calls int, tokens int64, final interceptors.SeverityCounts) {
	if outcome != interceptors.OutcomeAccepted {
		m.revisions.WithLabelValues(route, variant, outcome).Inc()
	}
	attempts.Observe(float64(calls))
	if tokens > 0 {
		m.tokens.WithLabelValues(route, variant).Add(float64(tokens))
	}
	for s, n := range final {
		if n > 0 {
			m.final.WithLabelValues(route, variant, interceptors.Severity(s).String()).Add(float64(n))
		}
	}
}
