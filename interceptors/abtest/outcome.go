package abtest

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/interceptors"
)

// The outcomes of a request, as counted per variant (the report's outcomes and the
// outcome label of factgate_experiment_requests_total). The first five are the
// hidden revision's (Trace.Final.Outcome).
const (
	OutcomeAccepted      = interceptors.OutcomeAccepted   // validated; nothing at or above the threshold
	OutcomeResolved      = interceptors.OutcomeResolved   // a revision or repair fixed every flag
	OutcomeImproved      = interceptors.OutcomeImproved   // a revision was better, flags remain (downgraded)
	OutcomeDowngraded    = interceptors.OutcomeDowngraded // no attempt beat the draft; flags downgraded
	OutcomeFailed        = interceptors.OutcomeFailed     // a hidden call failed; best attempt returned
	OutcomeUnvalidated   = "unvalidated"                  // the answer was not validated (validation off)
	OutcomeUpstreamError = "upstream_error"               // the first upstream call failed or answered non-2xx
	OutcomeError         = "error"                        // factgate ended the request with a 5xx (a fail-closed validator)
)

// Outcomes lists every outcome in report order.
var Outcomes = []string{OutcomeAccepted, OutcomeResolved, OutcomeImproved, OutcomeDowngraded, OutcomeFailed, OutcomeUnvalidated, OutcomeUpstreamError, OutcomeError}

// The counters of one variant's hash. Every request adds to requests, one latency
// bucket and the latency sum; the rest count only when they apply.
const (
	fieldRequests       = "requests"
	fieldLatencySum     = "latency_ms"
	fieldUpstreamErrors = "upstream_errors"
	fieldValidated      = "validated" // answers whose first draft was validated
	fieldIncomplete     = "validation_incomplete"
	fieldTokens         = "tokens"          // every upstream call of the request
	fieldTokensDraft    = "tokens_draft"    // the first call
	fieldTokensRevision = "tokens_revision" // hidden revision and repair calls
	fieldRevisions      = "revisions"       // hidden calls, summed
	fieldRevised        = "revised"         // requests with at least one hidden call
	fieldTriggered      = "triggered"       // validated drafts with an issue at or above the threshold
	fieldDowngraded     = "downgraded"      // answers returned with at least one claim lowered, a citation removed, its player corrected or the claim removed
	// fieldDraftContradiction counts first drafts with at least one Contradiction
	// issue: the headline "contradicted first draft".
	fieldDraftContradiction = "draft_contradiction"
	// fieldFinalContradiction counts answers delivered with a Contradiction still
	// in them: the answer as sent, after the revision step's downgrade.
	fieldFinalContradiction = "final_contradiction"
	// Prefixes completed by a severity's lower-case name ("draft_at_least_warning").
	prefixDraftAtLeast = "draft_at_least_" // drafts with an issue at or above the severity
	prefixDraftIssues  = "draft_issues_"   // issues of that severity in first drafts, summed
	prefixFinalIssues  = "final_issues_"   // issues of that severity left in the answers as delivered, summed
	prefixOutcome      = "outcome_"        // + an outcome
	prefixLatency      = "latency_le_"     // + a bucket bound in ms; "latency_le_inf" beyond the last
)

// latencyBoundsMS are the upper bounds of the counters' latency buckets, in
// milliseconds; coarse, enough for p50 and p95 within a bucket.
var latencyBoundsMS = []int64{100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 300000}

// latencyFields are the buckets' counters, in order; the last is unbounded.
var latencyFields = func() []string {
	out := make([]string, 0, len(latencyBoundsMS)+1)
	for _, b := range latencyBoundsMS {
		out = append(out, prefixLatency+strconv.FormatInt(b, 10))
	}
	return append(out, prefixLatency+"inf")
}()

// latencyField is the counter of the bucket holding d.
func latencyField(d time.Duration) string {
	ms := d.Milliseconds()
	for i, b := range latencyBoundsMS {
		if ms <= b {
			return latencyFields[i]
		}
	}
	return latencyFields[len(latencyBoundsMS)]
}

func severityField(prefix string, s interceptors.Severity) string {
	return prefix + strings.ToLower(s.String())
}

// The per-severity field names, built once.
var draftAtLeastFields, draftIssueFields, finalIssueFields = severityFields(prefixDraftAtLeast), severityFields(prefixDraftIssues), severityFields(prefixFinalIssues)

func severityFields(prefix string) (out [interceptors.Fatal + 1]string) {
	for s := interceptors.Info; s <= interceptors.Fatal; s++ {
		out[s] = severityField(prefix, s)
	}
	return out
}

// observation is what the response phase learnt about one request.
type observation struct {
	outcome    string
	latency    time.Duration
	validated  bool
	incomplete bool
	triggered  bool
	downgraded bool
	// draft and final count the issues of the first draft and of the answer as
	// delivered (after the downgrade), by severity (validated answers only).
	draft, final interceptors.SeverityCounts
	revisions    int
	tokens       struct{ total, draft, revision int64 }
}

// observe reads the outcome of a request from the exchange and its trace, after
// every other stage's response phase.
func observe(ex *interceptors.Exchange, latency time.Duration) observation {
	o := observation{latency: latency, revisions: ex.Revisions}
	o.tokens.total = int64(ex.Usage.TotalTokens)
	var final *interceptors.FinalOutcome
	sawDraft := false
	ex.Trace.Do(func(t *interceptors.Trace) {
		if t.Final != nil {
			f := *t.Final
			final = &f
		}
		for _, a := range t.Attempts {
			switch a.Kind {
			case interceptors.KindDraft:
				if !sawDraft {
					o.tokens.draft, sawDraft = int64(a.Usage.TotalTokens), true
				}
			case interceptors.KindRevision, interceptors.KindRepair:
				o.tokens.revision += int64(a.Usage.TotalTokens)
			}
		}
		// An edit that only lists alternatives or what would confirm a claim
		// lowers nothing.
		for _, d := range t.Downgrades {
			if d.From != d.To || len(d.RemovedEvidence) > 0 || d.Player != "" || d.Removed {
				o.downgraded = true
			}
		}
		o.incomplete = t.ValidationIncomplete
	})
	if !ex.Response.OK() {
		o.outcome = OutcomeUpstreamError
		return o
	}
	if !sawDraft {
		o.tokens.draft = int64(ex.Response.Usage().TotalTokens)
		if len(ex.Response.Body) == 0 {
			// An answer relayed live: its usage was read from the stream.
			o.tokens.draft = o.tokens.total
		}
	}
	o.validated = len(ex.Validators) > 0
	if !o.validated {
		o.outcome = OutcomeUnvalidated
		return o
	}
	draft := ex.DraftIssues
	if draft == nil && final == nil {
		draft = ex.Issues
	}
	o.draft = interceptors.CountSeverities(draft)
	// The answer as the client got it: after the revision step's downgrade.
	delivered := ex.DeliveredIssues
	if ex.Choices == nil {
		delivered = ex.Issues
	}
	o.final = interceptors.CountSeverities(delivered)
	o.outcome = OutcomeAccepted
	if final != nil && final.Outcome != "" {
		o.outcome = final.Outcome
	}
	o.triggered = o.outcome != OutcomeAccepted
	return o
}

// deltas are the counter increments of the observation.
func (o observation) deltas() map[string]int64 {
	d := make(map[string]int64, 24)
	add := func(field string, n int64) {
		if n != 0 {
			d[field] += n
		}
	}
	flag := func(field string, on bool) {
		if on {
			d[field]++
		}
	}
	add(fieldRequests, 1)
	add(fieldLatencySum, o.latency.Milliseconds())
	add(latencyField(o.latency), 1)
	add(prefixOutcome+o.outcome, 1)
	flag(fieldUpstreamErrors, o.outcome == OutcomeUpstreamError || o.outcome == OutcomeError)
	add(fieldTokens, o.tokens.total)
	add(fieldTokensDraft, o.tokens.draft)
	add(fieldTokensRevision, o.tokens.revision)
	add(fieldRevisions, int64(o.revisions))
	flag(fieldRevised, o.revisions > 0)
	flag(fieldDowngraded, o.downgraded)
	flag(fieldIncomplete, o.incomplete)
	if !o.validated {
		return d
	}
	add(fieldValidated, 1)
	flag(fieldTriggered, o.triggered)
	flag(fieldDraftContradiction, o.draft[interceptors.Contradiction] > 0)
	flag(fieldFinalContradiction, o.final[interceptors.Contradiction] > 0)
	for s := interceptors.Info; s <= interceptors.Fatal; s++ {
		flag(draftAtLeastFields[s], o.draft.AtLeast(s) > 0)
		add(draftIssueFields[s], int64(o.draft[s]))
		add(finalIssueFields[s], int64(o.final[s]))
	}
	return d
}

// metrics are the experiments' Prometheus metrics, one family each shared by every
// route's experiment (labelled by route, experiment and variant).
type metrics struct {
	requests    *prometheus.CounterVec   // route, experiment, variant, outcome
	assignments *prometheus.CounterVec   // route, experiment, variant, method
	drafts      *prometheus.CounterVec   // route, experiment, variant, worst
	finalIssues *prometheus.CounterVec   // route, experiment, variant, severity
	hiddenCalls *prometheus.CounterVec   // route, experiment, variant
	tokens      *prometheus.CounterVec   // route, experiment, variant, call
	duration    *prometheus.HistogramVec // route, experiment, variant
	writeErrors *prometheus.CounterVec   // route, experiment
}

var variantLabels = []string{"route", "experiment", "variant"}

func withLabels(extra ...string) []string {
	return append(append([]string(nil), variantLabels...), extra...)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		requests: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_experiment_requests_total",
			Help: "Requests of an A/B experiment by variant and outcome (accepted, resolved, improved, downgraded, failed, unvalidated, upstream_error, error).",
		}, withLabels("outcome"))),
		assignments: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_experiment_assignments_total",
			Help: "Variant assignments by how the variant was chosen (subject, random, forced, fallback).",
		}, withLabels("method"))),
		drafts: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_experiment_first_drafts_total",
			Help: "Validated first drafts by the severity of their worst issue (none when they had none).",
		}, withLabels("worst"))),
		finalIssues: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_experiment_final_issues_total",
			Help: "Issues left in the answers as delivered to clients (after the downgrade), by variant and severity.",
		}, withLabels("severity"))),
		hiddenCalls: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_experiment_revisions_total",
			Help: "Hidden revision and repair calls made for the variant's requests.",
		}, variantLabels)),
		tokens: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_experiment_tokens_total",
			Help: "Tokens of the variant's upstream calls: the draft, hidden revisions and repairs, and other calls (LLM-backed validators).",
		}, withLabels("call"))),
		duration: interceptors.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "factgate_experiment_request_duration_seconds",
			Help:    "Latency of the variant's requests, from assignment to the final answer (hidden revisions included).",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300},
		}, variantLabels)),
		writeErrors: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_experiment_counter_errors_total",
			Help: "Outcome counter writes to the cache that failed (the report misses those requests).",
		}, []string{"route", "experiment"})),
	}
}

// variantMetrics are one variant's resolved observers.
type variantMetrics struct {
	m              *metrics
	labels         [3]string // route, experiment, variant
	duration       prometheus.Observer
	hiddenCalls    prometheus.Counter
	tokensDraft    prometheus.Counter
	tokensRevision prometheus.Counter
	tokensOther    prometheus.Counter
}

func (m *metrics) forVariant(route, experiment, variant string) variantMetrics {
	return variantMetrics{
		m:              m,
		labels:         [3]string{route, experiment, variant},
		duration:       m.duration.WithLabelValues(route, experiment, variant),
		hiddenCalls:    m.hiddenCalls.WithLabelValues(route, experiment, variant),
		tokensDraft:    m.tokens.WithLabelValues(route, experiment, variant, "draft"),
		tokensRevision: m.tokens.WithLabelValues(route, experiment, variant, "revision"),
		tokensOther:    m.tokens.WithLabelValues(route, experiment, variant, "other"),
	}
}

func (vm variantMetrics) with(last string) []string {
	return []string{vm.labels[0], vm.labels[1], vm.labels[2], last}
}

// assigned counts one assignment.
func (vm variantMetrics) assigned(m Method) {
	vm.m.assignments.WithLabelValues(vm.with(string(m))...).Inc()
}

// observe records one finished request.
func (vm variantMetrics) observe(o observation) {
	vm.m.requests.WithLabelValues(vm.with(o.outcome)...).Inc()
	vm.duration.Observe(o.latency.Seconds())
	if o.revisions > 0 {
		vm.hiddenCalls.Add(float64(o.revisions))
	}
	if o.tokens.draft > 0 {
		vm.tokensDraft.Add(float64(o.tokens.draft))
	}
	if o.tokens.revision > 0 {
		vm.tokensRevision.Add(float64(o.tokens.revision))
	}
	if other := o.tokens.total - o.tokens.draft - o.tokens.revision; other > 0 {
		vm.tokensOther.Add(float64(other))
	}
	if !o.validated {
		return
	}
	worst := "none"
	if s, ok := maxSeverity(o.draft); ok {
		worst = s.String()
	}
	vm.m.drafts.WithLabelValues(vm.with(worst)...).Inc()
	for s, n := range o.final {
		if n > 0 {
			vm.m.finalIssues.WithLabelValues(vm.with(interceptors.Severity(s).String())...).Add(float64(n))
		}
	}
}

// maxSeverity returns the most severe severity with a count, and whether any has.
func maxSeverity(c interceptors.SeverityCounts) (interceptors.Severity, bool) {
	for s := interceptors.Fatal; s >= interceptors.Info; s-- {
		if c[s] > 0 {
			return s, true
		}
	}
	return interceptors.Info, false
}
