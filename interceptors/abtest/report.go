package abtest

import (
	"context"
	"fmt"

	"github.com/factgate/factgate/interceptors"
)

// Report is the body of GET /factgate/v1/experiments: every experiment's variants
// with their counts and rates, and each variant against its control.
type Report struct {
	// Confidence is the level of every interval (0.95).
	Confidence  float64            `json:"confidence"`
	Experiments []ExperimentReport `json:"experiments"`
}

// ExperimentReport is one route's experiment.
type ExperimentReport struct {
	Route   string `json:"route"`
	Name    string `json:"name"`
	Control string `json:"control"`
	// Variants are in config order.
	Variants []VariantReport `json:"variants"`
	// Comparisons hold each non-control variant against the control, for the
	// metrics in ComparedMetrics, in that order.
	Comparisons []Comparison `json:"comparisons"`
	// Error says why the counters could not be read ("" when they were); the
	// counts are then those read before the failure.
	Error string `json:"error,omitempty"`
}

// VariantReport is one variant's counts and rates. Forced requests
// (X-Factgate-Variant) are counted apart, in ForcedRequests, and in nothing else:
// they are not a random sample, so they stay out of the comparison.
type VariantReport struct {
	Name    string  `json:"name"`
	Control bool    `json:"control,omitempty"`
	Weight  float64 `json:"weight"`
	// Share is the variant's configured share of the traffic (weight / Σ weights).
	Share float64 `json:"share"`

	// Requests counts the variant's requests that reached the model (or failed
	// upstream); requests a later stage rejected with a 4xx are not counted.
	Requests       int64 `json:"requests"`
	ForcedRequests int64 `json:"forced_requests"`
	// Validated counts the answers whose first draft was validated: the
	// denominator of the first-draft, revision, downgrade and residual rates.
	Validated      int64 `json:"validated"`
	UpstreamErrors int64 `json:"upstream_errors"`
	// ValidationIncomplete counts answers a validator could not fully check.
	ValidationIncomplete int64 `json:"validation_incomplete"`
	// Revisions counts the hidden revision and repair calls; Revised the requests
	// with at least one.
	Revisions int64 `json:"revisions"`
	Revised   int64 `json:"revised"`
	// Outcomes counts the requests by outcome (see Outcomes).
	Outcomes map[string]int64 `json:"outcomes"`
	// DraftIssues and ResidualIssues sum the issues of the first drafts and of the
	// answers returned, by severity name.
	DraftIssues    map[string]int64 `json:"draft_issues"`
	ResidualIssues map[string]int64 `json:"residual_issues"`
	Latency        Latency          `json:"latency_ms"`
	Tokens         Tokens           `json:"tokens"`
	Rates          Rates            `json:"rates"`
}

// Rates are a variant's proportions, each with its 95% Wilson interval.
type Rates struct {
	// FirstDraftContradiction: validated first drafts with at least one
	// Contradiction issue — the headline of the comparison.
	FirstDraftContradiction Rate `json:"first_draft_contradiction"`
	// FirstDraftAtLeast: validated first drafts with an issue at or above each
	// severity (keyed by severity name).
	FirstDraftAtLeast map[string]Rate `json:"first_draft_at_least"`
	// Revision: validated answers that needed at least one hidden call.
	Revision Rate `json:"revision"`
	// Resolved: of the drafts that triggered the revision (an issue at or above the
	// threshold), those a revision or repair fixed completely.
	Resolved Rate `json:"resolved"`
	// Downgrade: validated answers returned with at least one claim lowered, a
	// citation removed or its player corrected (an accepted draft's weak claims
	// too, under revise.downgrade below_threshold).
	Downgrade Rate `json:"downgrade"`
	// ResidualContradiction: validated answers whose returned attempt still has a
	// Contradiction (its claims downgraded).
	ResidualContradiction Rate `json:"residual_contradiction"`
	// Error: requests whose first upstream call failed or answered non-2xx.
	Error Rate `json:"error"`
}

// Rate is Count out of Total with its 95% Wilson interval. Value, Low and High are
// null when Total is 0.
type Rate struct {
	Count int64    `json:"count"`
	Total int64    `json:"total"`
	Value *float64 `json:"rate"`
	Low   *float64 `json:"low"`
	High  *float64 `json:"high"`
}

// NewRate builds a Rate with its Wilson interval.
func NewRate(count, total int64) Rate {
	r := Rate{Count: count, Total: total}
	if iv, ok := Wilson(count, total, Z95); ok {
		r.Value = ptr(float64(count) / float64(total))
		r.Low, r.High = ptr(iv.Low), ptr(iv.High)
	}
	return r
}

// String renders the rate as "12/40 = 0.3 [0.18, 0.46]" ("0/0" without data).
func (r Rate) String() string {
	if r.Value == nil || r.Low == nil || r.High == nil {
		return fmt.Sprintf("%d/%d", r.Count, r.Total)
	}
	return fmt.Sprintf("%d/%d = %.4g [%.4g, %.4g]", r.Count, r.Total, *r.Value, *r.Low, *r.High)
}

// Latency summarises the variant's request latencies (assignment to final answer).
type Latency struct {
	// Mean is null without requests.
	Mean *float64 `json:"mean"`
	// P50AtMost and P95AtMost are the upper bounds of the buckets holding the
	// median and the 95th percentile; null without requests or beyond the last
	// bound.
	P50AtMost *float64 `json:"p50_at_most"`
	P95AtMost *float64 `json:"p95_at_most"`
	// Buckets count the requests per latency bucket.
	Buckets []LatencyBucket `json:"buckets"`
}

// LatencyBucket counts the requests that took at most UpTo milliseconds and more
// than the previous bucket's bound; UpTo is null for the last, unbounded bucket.
type LatencyBucket struct {
	UpTo  *float64 `json:"le"`
	Count int64    `json:"count"`
}

// Tokens are the tokens of the variant's upstream calls.
type Tokens struct {
	// Total is every call's tokens: the draft, hidden revisions and repairs, and
	// LLM-backed validators — what the clients were billed.
	Total    int64 `json:"total"`
	Draft    int64 `json:"draft"`
	Revision int64 `json:"revision"`
	// Mean is Total per request that got an answer; null without one.
	Mean *float64 `json:"mean"`
}

// Comparison is one variant against the control for one rate: the difference
// (variant − control) with Newcombe's 95% interval and the pooled two-proportion
// z-test. Values are null when a group has no data; Z and P are null as well when
// the test is undefined (neither group has any event, or both only events).
type Comparison struct {
	Variant    string   `json:"variant"`
	Metric     string   `json:"metric"`
	Control    Rate     `json:"control"`
	Treatment  Rate     `json:"treatment"`
	Difference *float64 `json:"difference"`
	Low        *float64 `json:"low"`
	High       *float64 `json:"high"`
	Z          *float64 `json:"z"`
	P          *float64 `json:"p_value"`
}

// The compared metrics, by their key in Rates' JSON.
const (
	MetricFirstDraftContradiction = "first_draft_contradiction"
	MetricRevision                = "revision"
	MetricResidualContradiction   = "residual_contradiction"
)

// ComparedMetrics are the rates each variant is compared on, headline first.
var ComparedMetrics = []string{MetricFirstDraftContradiction, MetricRevision, MetricResidualContradiction}

func (r *Rates) byMetric(metric string) Rate {
	switch metric {
	case MetricFirstDraftContradiction:
		return r.FirstDraftContradiction
	case MetricRevision:
		return r.Revision
	case MetricResidualContradiction:
		return r.ResidualContradiction
	}
	return Rate{}
}

// Compare compares the treatment's rate with the control's.
func Compare(variant, metric string, control, treatment Rate) Comparison {
	c := Comparison{Variant: variant, Metric: metric, Control: control, Treatment: treatment}
	t, ok := CompareProportions(treatment.Count, treatment.Total, control.Count, control.Total)
	if !ok {
		return c
	}
	c.Difference, c.Low, c.High = ptr(t.Difference), ptr(t.Interval.Low), ptr(t.Interval.High)
	if t.Testable {
		c.Z, c.P = ptr(t.Z), ptr(t.P)
	}
	return c
}

// BuildReport reads the counters of every experiment and computes the report. A
// failure to read one experiment's counters is reported in its Error.
func BuildReport(ctx context.Context, experiments []*Experiment) Report {
	rep := Report{Confidence: 0.95, Experiments: make([]ExperimentReport, 0, len(experiments))}
	for _, e := range experiments {
		rep.Experiments = append(rep.Experiments, e.Report(ctx))
	}
	return rep
}

// Report reads the experiment's counters and computes its part of the report.
func (e *Experiment) Report(ctx context.Context) ExperimentReport {
	er := ExperimentReport{Route: e.route, Name: e.name, Control: e.control.name, Variants: make([]VariantReport, 0, len(e.variants))}
	var control *VariantReport
	for _, v := range e.variants {
		counts, forced, err := e.counters(ctx, v)
		if err != nil && er.Error == "" {
			er.Error = fmt.Sprintf("reading the counters of variant %s: %v", v.name, err)
		}
		vr := variantReport(v.name, v.weight, e.totalWeight, counts)
		vr.Control = v.control
		vr.ForcedRequests = forced[fieldRequests]
		er.Variants = append(er.Variants, vr)
	}
	for i := range er.Variants {
		if er.Variants[i].Control {
			control = &er.Variants[i]
		}
	}
	for _, vr := range er.Variants {
		if vr.Control {
			continue
		}
		for _, m := range ComparedMetrics {
			er.Comparisons = append(er.Comparisons, Compare(vr.Name, m, control.Rates.byMetric(m), vr.Rates.byMetric(m)))
		}
	}
	return er
}

// counters reads a variant's counters and its forced requests' counters.
func (e *Experiment) counters(ctx context.Context, v *variant) (counts, forced map[string]int64, err error) {
	if e.cache == nil {
		return map[string]int64{}, map[string]int64{}, nil
	}
	if counts, err = e.cache.HashGetAll(ctx, v.key); err != nil {
		return map[string]int64{}, map[string]int64{}, err
	}
	if forced, err = e.cache.HashGetAll(ctx, v.forcedKey); err != nil {
		return counts, map[string]int64{}, err
	}
	return counts, forced, nil
}

// variantReport computes one variant's report from its counters.
func variantReport(name string, weight, totalWeight float64, c map[string]int64) VariantReport {
	vr := VariantReport{
		Name:                 name,
		Weight:               weight,
		Share:                weight / totalWeight,
		Requests:             c[fieldRequests],
		Validated:            c[fieldValidated],
		UpstreamErrors:       c[fieldUpstreamErrors],
		ValidationIncomplete: c[fieldIncomplete],
		Revisions:            c[fieldRevisions],
		Revised:              c[fieldRevised],
		Outcomes:             make(map[string]int64, len(Outcomes)),
		DraftIssues:          make(map[string]int64, 5),
		ResidualIssues:       make(map[string]int64, 5),
	}
	for _, o := range Outcomes {
		vr.Outcomes[o] = c[prefixOutcome+o]
	}
	validated := vr.Validated
	vr.Rates = Rates{
		FirstDraftContradiction: NewRate(c[fieldDraftContradiction], validated),
		FirstDraftAtLeast:       make(map[string]Rate, 5),
		Revision:                NewRate(c[fieldRevised], validated),
		Resolved:                NewRate(c[prefixOutcome+OutcomeResolved], c[fieldTriggered]),
		Downgrade:               NewRate(c[fieldDowngraded], validated),
		ResidualContradiction:   NewRate(c[fieldFinalContradiction], validated),
		Error:                   NewRate(vr.UpstreamErrors, vr.Requests),
	}
	for s := interceptors.Info; s <= interceptors.Fatal; s++ {
		vr.DraftIssues[s.String()] = c[draftIssueFields[s]]
		vr.ResidualIssues[s.String()] = c[finalIssueFields[s]]
		vr.Rates.FirstDraftAtLeast[s.String()] = NewRate(c[draftAtLeastFields[s]], validated)
	}
	vr.Latency = latencySummary(c, vr.Requests)
	vr.Tokens = Tokens{Total: c[fieldTokens], Draft: c[fieldTokensDraft], Revision: c[fieldTokensRevision]}
	if answered := vr.Requests - vr.UpstreamErrors; answered > 0 {
		vr.Tokens.Mean = ptr(float64(vr.Tokens.Total) / float64(answered))
	}
	return vr
}

// latencySummary reads the latency sum and buckets.
func latencySummary(c map[string]int64, requests int64) Latency {
	var l Latency
	for i, b := range latencyBoundsMS {
		l.Buckets = append(l.Buckets, LatencyBucket{UpTo: ptr(float64(b)), Count: c[latencyFields[i]]})
	}
	l.Buckets = append(l.Buckets, LatencyBucket{Count: c[latencyFields[len(latencyBoundsMS)]]})
	if requests <= 0 {
		return l
	}
	l.Mean = ptr(float64(c[fieldLatencySum]) / float64(requests))
	l.P50AtMost = quantileBound(l.Buckets, 0.50)
	l.P95AtMost = quantileBound(l.Buckets, 0.95)
	return l
}

// quantileBound returns the upper bound of the bucket holding the q-quantile of
// the bucketed values (the smallest bound with at least q of them at or below it),
// or nil when that is the unbounded bucket or there are no values.
func quantileBound(buckets []LatencyBucket, q float64) *float64 {
	var total int64
	for _, b := range buckets {
		total += b.Count
	}
	if total == 0 {
		return nil
	}
	var cum int64
	for _, b := range buckets {
		cum += b.Count
		if float64(cum) >= q*float64(total) {
			return b.UpTo
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
