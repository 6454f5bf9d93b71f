package semantic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/knowledge"
)

// ErrorCode is the OpenAI error code of a request that failed because its draft
// could not be checked under failure_policy closed.
const ErrorCode = "semantic_validation_failed"

// Semantic is a route's "semantic" stage: the pack's LLM-backed validators the
// route's semantic block names, with its model profile.
//
// Its request phase registers the validators on the exchange — unless validation
// is off for the request, by the validate block or by the A/B variant. (It runs
// before the validate stage's request phase; the order of registration does not
// matter, the exchange runs the deterministic validators first.) The validate stage's response phase then runs them on the
// draft, and the hidden revision on every revision, through
// Exchange.ValidateAnswer, which skips them when a deterministic validator found
// something Fatal: a malformed answer costs no judge call.
//
// Failure: under failure_policy open (the default) it fails open — a judge that
// cannot give a valid verdict leaves a semantic.failed Warning, the trace marks
// validation incomplete, and the answer passes. Under failure_policy closed its
// response phase (which runs after the draft was validated and before the hidden
// revision) ends the request with 502 (504 when the judge timed out) and the error
// code semantic_validation_failed when the draft could not be checked; a revision
// that could not be checked carries a Fatal issue, so it never wins over the
// checked draft.
type Semantic struct {
	route          string
	pack           *knowledge.Pack
	validators     []*Validator
	settings       Settings
	routeValidates bool
}

// New builds the semantic stage of a route from its semantic block and the route's
// pack. Every config problem surfaces here: no pack, a validator the pack does not
// declare, an unknown upstream, an out-of-range value.
func New(cfg Config, deps interceptors.Deps) (*Semantic, error) {
	if deps.Pack == nil {
		return nil, errors.New("semantic validators need the route's pack (set pack:)")
	}
	if len(deps.Pack.Semantic) == 0 {
		return nil, fmt.Errorf("pack %s declares no semantic validators", deps.Pack.Name)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Upstream != "" && !deps.HasUpstream(cfg.Upstream) {
		return nil, fmt.Errorf("upstream: no upstream named %q (have %s)", cfg.Upstream, strings.Join(deps.Upstreams, ", "))
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Semantic{route: deps.Route, pack: deps.Pack, settings: cfg.Settings(), routeValidates: cfg.RouteValidates}
	s.settings.MaxJSONDepth = deps.MaxJSONDepth
	m := newMetrics(deps.Metrics)
	for i, name := range cfg.Validators {
		v, err := newValidator(deps.Pack, name, s.settings, deps.Route, m, log)
		if err != nil {
			return nil, fmt.Errorf("validators[%d]: %w", i, err)
		}
		s.validators = append(s.validators, v)
	}
	return s, nil
}

// Name implements interceptors.Interceptor.
func (s *Semantic) Name() string { return "semantic" }

// Validators returns the stage's validators, in the order the config names them.
func (s *Semantic) Validators() []*Validator { return slices.Clone(s.validators) }

// OnRequest implements interceptors.RequestPhase: it registers the validators
// when the request is validated (and the pack's contract applies to it).
func (s *Semantic) OnRequest(_ context.Context, ex *interceptors.Exchange) error {
	on := s.routeValidates
	if o := ex.Overrides.Validate; o != nil {
		on = *o
	}
	if !on || !reqcontext.Applies(ex, s.pack).Contract {
		return nil
	}
	for _, v := range s.validators {
		ex.Validators = append(ex.Validators, v)
	}
	return nil
}

// OnResponse implements interceptors.ResponsePhase. Under failure_policy closed it
// fails the request when a validator of this stage could not check the draft;
// otherwise it does nothing.
func (s *Semantic) OnResponse(_ context.Context, ex *interceptors.Exchange) error {
	if s.settings.FailurePolicy != FailClosed || !ex.Response.OK() {
		return nil
	}
	issues := ex.DraftIssues
	if issues == nil {
		issues = ex.Issues
	}
	for _, is := range issues {
		if is.Code != CodeFailed || is.Severity != interceptors.Fatal || !s.owns(is.Validator) {
			continue
		}
		f, _ := lastFailure(ex, is.Validator)
		status := 502
		if f.timeout {
			status = 504
		}
		ex.Trace.Note("semantic: failure_policy closed: the draft could not be checked, the request fails")
		return &interceptors.Error{
			Status:  status,
			Type:    "upstream_error",
			Code:    ErrorCode,
			Message: fmt.Sprintf("the answer could not be checked by the %s validator (%s) and this route does not pass unchecked answers (semantic failure_policy: closed)", is.Args["validator"], f.reason),
		}
	}
	return nil
}

func (s *Semantic) owns(validator string) bool {
	for _, v := range s.validators {
		if v.name == validator {
			return true
		}
	}
	return false
}

// metrics are the semantic validators' Prometheus metrics, shared by every route.
type metrics struct {
	validations *prometheus.CounterVec
	calls       *prometheus.CounterVec
	tokens      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	return &metrics{
		validations: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_semantic_validations_total",
			Help: "Answers checked by LLM-backed validators, by route, A/B variant, validator and outcome (approved, rejected, failed).",
		}, []string{"route", "variant", "validator", "outcome"})),
		calls: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_semantic_calls_total",
			Help: "Judge calls of LLM-backed validators, by route, A/B variant, validator and result (ok, failed, cancelled, budget_exhausted).",
		}, []string{"route", "variant", "validator", "result"})),
		tokens: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_semantic_tokens_total",
			Help: "Tokens spent on judge calls of LLM-backed validators, by route, A/B variant and validator.",
		}, []string{"route", "variant", "validator"})),
	}
}

// The methods accept a nil *metrics (no registry): they record nothing.

func (m *metrics) outcome(route, variant, validator, outcome string) {
	if m != nil {
		m.validations.WithLabelValues(route, variant, validator, outcome).Inc()
	}
}

func (m *metrics) call(route, variant, validator, result string) {
	if m != nil {
		m.calls.WithLabelValues(route, variant, validator, result).Inc()
	}
}

func (m *metrics) addTokens(route, variant, validator string, n int) {
	if m != nil && n > 0 {
		m.tokens.WithLabelValues(route, variant, validator).Add(float64(n))
	}
}

// HoldsAnswer implements interceptors.AnswerHolder: the stage reads the issues
// of a validated answer only.
func (s *Semantic) HoldsAnswer(ex *interceptors.Exchange) bool { return len(ex.Validators) > 0 }

// Interface guards.
var (
	_ interceptors.RequestPhase  = (*Semantic)(nil)
	_ interceptors.ResponsePhase = (*Semantic)(nil)
	_ interceptors.AnswerHolder  = (*Semantic)(nil)
)
