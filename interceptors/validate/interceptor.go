package validate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/knowledge"
)

// HeaderIssues is the response header with the issue counts by severity of the
// first draft, of the final answer as validated and of the answer as delivered
// (after the revision step's downgrade): "draft=C1,W2;final=C1;delivered=0".
const HeaderIssues = "X-Factgate-Issues"

// AttemptDraft is the trace attempt kind of the first answer.
const AttemptDraft = "draft"

// Validate is the validation interceptor of a route (the "validate" stage).
//
// Its request phase resolves the request context (the context stage's, else the
// pack's header rules) and registers the deterministic answer validators on the
// exchange — the answer shape (ShapeValidator) when the pack declares one, the
// claims rules when it has a claims contract — unless validation is off for the
// request, by config or by the A/B variant, so that every attempt (the draft and
// each hidden revision) is checked the same way. The fact index comes from the facts stage
// (facts.FromExchange, awaited when the first answer is checked); a chain without
// one extracts it here from the user messages. Its response phase, when the
// upstream answered 2xx, validates the draft with Exchange.ValidateAnswer (so the
// LLM-backed validators other stages registered run too), stores the issues in
// ex.Issues and ex.DraftIssues, records a "draft" attempt and the time taken in
// the trace, counts the issues in factgate_validation_issues_total and sets
// X-Factgate-Issues (final = delivered = draft until a revision step overwrites it). The
// answer itself passes unchanged.
//
// It fails open: a validator that cannot run (an internal error, a panic) leaves
// the answer to pass, marks the trace's validation incomplete and says why.
type Validate struct {
	settings  Settings
	checker   *Checker
	pack      *knowledge.Pack
	lib       *knowledge.Library
	extractor *facts.Extractor // nil when the pack has no fact rules
	route     string
	log       *slog.Logger
	issues    *prometheus.CounterVec
	validator *answerValidator // nil when the pack has no claims contract
	// shape checks a pack's JSON answer shape (nil when the pack declares none).
	shape *ShapeValidator
}

// New builds the validation stage of a route from its `validate:` block. The route
// must name a pack with a claims contract or an answer shape (or both); every
// config problem surfaces here.
func New(cfg Config, deps interceptors.Deps) (*Validate, error) {
	if deps.Pack == nil {
		return nil, errors.New("validation needs the route's pack (set pack: on the route)")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Pack.Claims == nil && deps.Pack.Answer == nil {
		return nil, fmt.Errorf("validate: pack %s has neither a claims contract nor an answer shape to check answers against", deps.Pack.Name)
	}
	var c *Checker
	if deps.Pack.Claims != nil {
		var err error
		if c, err = NewChecker(deps.Pack, cfg); err != nil {
			return nil, err
		}
	}
	v := &Validate{
		settings: cfg.Settings(),
		checker:  c,
		pack:     deps.Pack,
		lib:      deps.Library,
		route:    deps.Route,
		log:      deps.Log,
	}
	if deps.Pack.Answer != nil {
		var err error
		if v.shape, err = NewShapeValidator(deps.Pack); err != nil {
			return nil, err
		}
	}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	if deps.Pack.Facts != nil {
		var err error
		if v.extractor, err = facts.NewExtractor(deps.Pack.Facts); err != nil {
			return nil, fmt.Errorf("pack %s: %w", deps.Pack.Name, err)
		}
	}
	v.issues = interceptors.Register(deps.Metrics, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "factgate_validation_issues_total",
		Help: "Issues found in first drafts by the validators, by code, severity, route and A/B variant (\"\" without an experiment).",
	}, []string{"code", "severity", "route", "variant"}))
	if c != nil {
		v.validator = &answerValidator{v: v}
	}
	return v, nil
}

// Name implements interceptors.Interceptor.
func (v *Validate) Name() string { return "validate" }

// Checker returns the stage's checker of the claims rules (nil when the pack has
// no claims contract).
func (v *Validate) Checker() *Checker { return v.checker }

// Settings returns the stage's settings (the revision step reads StripClaims).
func (v *Validate) Settings() Settings { return v.settings }

// enabled applies the A/B variant's override to the route's setting.
func (v *Validate) enabled(ex *interceptors.Exchange) bool {
	if o := ex.Overrides.Validate; o != nil {
		return *o
	}
	return v.settings.Enabled
}

// stateKey stores a request's *requestState in the exchange.
type stateKey struct{}

// requestState is what one request's answers are checked against: the request
// context, resolved by the request phase, and the fact index, resolved when the
// first answer is checked (the facts stage builds it while the upstream works).
type requestState struct {
	in    Input
	facts sync.Once
	// locations are in.Locations when the request phase attached them.
	locations claims.Locations
}

// OnRequest implements interceptors.RequestPhase: it resolves the request context
// and registers the validator — when validation is on for the request and the
// pack's contract applies to it (reqcontext.Applies: not a greeting, not a JSON-mode
// call of a claims pack); any other answer passes as the upstream sent it.
func (v *Validate) OnRequest(_ context.Context, ex *interceptors.Exchange) error {
	if !v.enabled(ex) {
		return nil
	}
	if a := reqcontext.Applies(ex, v.pack); !a.Contract {
		ex.Trace.Note("validate: not validated: " + a.Reason)
		return nil
	}
	st := v.requestContext(ex)
	if v.shape != nil {
		ex.AddValidator(v.shape)
	}
	if v.validator != nil {
		ex.AddValidator(v.validator)
		// Remember where each answer's claims block is: the revision step strips
		// the block of the draft the rules parse.
		st.locations.Attach(ex)
		st.in.Locations = &st.locations
	}
	ex.SetValue(stateKey{}, st)
	return nil
}

// OnResponse implements interceptors.ResponsePhase: it validates the draft —
// every choice of it, each on its own (ex.Choices), except a choice that calls
// tools, which is returned as the upstream sent it.
func (v *Validate) OnResponse(ctx context.Context, ex *interceptors.Exchange) error {
	if ex.Value(stateKey{}) == nil || !ex.Response.OK() {
		return nil
	}
	n := ex.Response.NumChoices()
	ex.NewChoices(n)
	var total interceptors.SeverityCounts
	for i := range n {
		c := &ex.Choices[i]
		c.Index = i
		if reason := skipChoice(ex.Response, i); reason != "" {
			c.Skipped = reason
			ex.Trace.Note(fmt.Sprintf("validate: choice %d %s; it is returned as the upstream sent it, not validated", i, skipText[reason]))
			continue
		}
		content := ex.Response.ChoiceContent(i)
		start := time.Now()
		issues, errs := ex.ValidateAnswer(ctx, content)
		took := time.Since(start)
		if len(errs) > 0 {
			msgs := make([]string, len(errs))
			for i, err := range errs {
				msgs[i] = err.Error()
			}
			ex.Trace.Do(func(t *interceptors.Trace) { t.ValidationIncomplete = true })
			ex.Trace.Note("validate: validation incomplete, the answer passes: " + strings.Join(msgs, "; "))
			v.log.Warn("validation incomplete", "route", v.route, "errors", strings.Join(msgs, "; "))
		}
		c.DraftIssues, c.Issues, c.Delivered = issues, issues, issues
		counts := interceptors.CountSeverities(issues)
		total = total.Add(counts)
		ex.Trace.AddAttempt(interceptors.Attempt{
			Kind:         AttemptDraft,
			Choice:       i,
			Issues:       issues,
			Counts:       counts.String(),
			RequestBytes: len(ex.Body),
			Duration:     units.Millis(ex.Response.Duration),
			Usage:        ex.Response.Usage(),
			Content:      content,
		})
		ex.Trace.Time("validate", took)
		for _, is := range issues {
			v.issues.WithLabelValues(is.Code, is.Severity.String(), v.route, ex.Overrides.Variant).Inc()
		}
	}
	ex.CollectIssues()
	if ex.Validated() {
		ex.SetHeader(HeaderIssues, interceptors.IssueCountsHeader(total, total, total))
	}
	return nil
}

// HoldsAnswer implements interceptors.AnswerHolder: the request phase chose to
// validate the answer (validation is on and the pack's contract applies).
func (v *Validate) HoldsAnswer(ex *interceptors.Exchange) bool { return ex.Value(stateKey{}) != nil }

// The reasons a choice is not validated (interceptors.Choice.Skipped).
const skipNoContent = "no_content"

var skipText = map[string]string{
	interceptors.SkipToolCalls: "calls tools",
	skipNoContent:              "has no content (null)",
}

// skipChoice says why the choice at position i is not validated: it calls tools,
// or its content is null (a refusal); "" when it is validated.
func skipChoice(r *interceptors.Response, i int) string {
	if r.HasToolCalls(i) {
		return interceptors.SkipToolCalls
	}
	if r.ChoiceContentNull(i) {
		return skipNoContent
	}
	return ""
}

// requestContext resolves the knowledge set, players and scopes: from the context
// stage (reqcontext.FromExchange), else with the pack's header rules on the user
// messages.
func (v *Validate) requestContext(ex *interceptors.Exchange) *requestState {
	st := &requestState{}
	in := &st.in
	setName := ""
	if rc, ok := reqcontext.FromExchange(ex); ok {
		in.Set, setName, in.Players, in.Scopes = rc.Set, rc.KnowledgeSet, rc.Players, rc.Scopes
	} else {
		x := knowledge.ExtractContextTexts(v.pack, reqcontext.UserTexts(clientBody(ex)))
		setName = firstNonEmpty(ex.Overrides.KnowledgeSet, x.KnowledgeSet, v.pack.DefaultSet)
		in.Players, in.Scopes = x.Players, x.Scopes
		ex.Trace.Do(func(t *interceptors.Trace) {
			if t.KnowledgeSet == "" {
				t.KnowledgeSet, t.Scopes = setName, in.Scopes
			}
		})
	}
	if in.Set == nil && setName != "" && v.lib != nil {
		if set, p := v.lib.Set(setName); set != nil && p != nil && p.Name == v.pack.Name {
			in.Set = set
		} else {
			ex.Trace.Note(fmt.Sprintf("validate: knowledge set %q is not a set of pack %s; the rules that need knowledge are off", setName, v.pack.Name))
		}
	}
	return st
}

// input returns what answers of ex are checked against, resolving the fact index
// on the first call: the facts stage's (facts.FromExchange), else — on a chain
// without one — extracted here from the user messages. A truncated index (a log
// past the extraction bound) is not used: a cut log would make every citation past
// the cut "not in the replay"; the trace says validation was incomplete.
func (v *Validate) input(ex *interceptors.Exchange) Input {
	st, ok := ex.Value(stateKey{}).(*requestState)
	if !ok {
		st = v.requestContext(ex)
		ex.SetValue(stateKey{}, st)
	}
	st.facts.Do(func() {
		ix, info, err := facts.FromExchange(ex)
		switch {
		case errors.Is(err, facts.ErrNoFacts):
			ix, info.Truncated = v.extract(ex)
		case err != nil:
			ex.Trace.Do(func(t *interceptors.Trace) { t.ValidationIncomplete = true })
			return // the facts stage has said why in the trace
		}
		if info.Truncated || ix.Truncated() {
			ex.Trace.Do(func(t *interceptors.Trace) { t.ValidationIncomplete = true })
			ex.Trace.Note("validate: the operation log exceeds the fact extraction bound; the rules that need facts are off for this request")
			return
		}
		if info.MissingSegments > 0 || info.SessionUnconfirmed {
			st.in.MissingSegments, st.in.SessionUnconfirmed = info.MissingSegments, info.SessionUnconfirmed
			ex.Trace.Do(func(t *interceptors.Trace) { t.ValidationIncomplete = true })
			if info.MissingSegments > 0 {
				ex.Trace.Note(fmt.Sprintf("validate: %d segment(s) of the session are gone from every cache tier; the rules that need facts are off for this request (issue %s)", info.MissingSegments, CodeSegmentsMissing))
			}
			if info.SessionUnconfirmed {
				ex.Trace.Note(fmt.Sprintf("validate: the session's list of segments could not be read from the shared cache; the rules that need facts are off for this request (issue %s)", CodeSessionUnconfirmed))
			}
			return
		}
		if !ix.HasFacts() {
			ex.Trace.Note("validate: no line of the request is an operation; only the rules that need no facts apply")
		}
		st.in.Index = ix
	})
	return st.in
}

// extract builds the fact index from the user messages, for a chain without a
// facts stage.
func (v *Validate) extract(ex *interceptors.Exchange) (*facts.Index, bool) {
	if v.extractor == nil {
		return nil, false
	}
	texts := reqcontext.UserTexts(clientBody(ex))
	start := time.Now()
	ix, err := v.extractor.ExtractTexts(texts...)
	ex.Trace.Time("facts", time.Since(start))
	if err != nil {
		ex.Trace.Note("validate: no facts: " + err.Error())
		return nil, false
	}
	ex.Trace.Do(func(t *interceptors.Trace) {
		if t.FactKey == "" {
			t.FactKey = v.extractor.SourceKey(texts...)
		}
	})
	return ix, ix.Truncated()
}

// clientBody is the client's request as received (the user messages the facts
// come from), or the outgoing body when the exchange has no copy of it.
func clientBody(ex *interceptors.Exchange) []byte {
	if ex.Original != nil {
		return ex.Original
	}
	return ex.Body
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// answerValidator is the stage's interceptors.AnswerValidator: the deterministic
// rules, against the input the request phase resolved.
type answerValidator struct{ v *Validate }

// Name implements interceptors.AnswerValidator.
func (a *answerValidator) Name() string { return ValidatorName }

// LLMBacked implements interceptors.AnswerValidator: the rules make no model call.
func (a *answerValidator) LLMBacked() bool { return false }

// ValidateAnswer implements interceptors.AnswerValidator. A panic in a rule is
// returned as an error (the stage fails open).
func (a *answerValidator) ValidateAnswer(_ context.Context, ex *interceptors.Exchange, content string) (issues []interceptors.Issue, err error) {
	defer func() {
		if p := recover(); p != nil {
			issues, err = nil, fmt.Errorf("validate: internal error checking the answer: %v", p)
		}
	}()
	return a.v.checker.Check(content, a.v.input(ex)), nil
}

// Interface guards.
var (
	_ interceptors.RequestPhase    = (*Validate)(nil)
	_ interceptors.ResponsePhase   = (*Validate)(nil)
	_ interceptors.AnswerHolder    = (*Validate)(nil)
	_ interceptors.AnswerValidator = (*answerValidator)(nil)
)
