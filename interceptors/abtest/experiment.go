package abtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors"
)

// Experiment is a route's A/B experiment: the "experiment" stage, the outermost
// of the chain, so that its request phase runs before every other stage and its
// response phase after all of them.
//
// Its request phase assigns the request a variant — forced by X-Factgate-Variant
// when the experiment allows forcing, else sticky by the request's subject, else at
// random by weight — and applies the variant: ex.Overrides for the later stages
// (knowledge set, custom prompt, additional rules, validation, max_revisions,
// threshold), the model and sampling fields in the outgoing body (edited in place
// with sjson; every other byte survives), the X-Factgate-Variant response header
// and Trace.Variant. Its response phase sees the final outcome and adds it to the
// variant's counters in the cache (in the background) and to the Prometheus
// metrics.
//
// It fails open: when assignment or applying the variant fails, the request gets
// the control and the trace says why; a failure counting the outcome is logged and
// counted, never returned. The one error it returns is a forced variant the
// experiment does not have (400 unknown_variant). It is safe for concurrent use.
type Experiment struct {
	route        string
	name         string
	salt         string
	allowForcing bool
	variants     []*variant // in config order
	byName       map[string]*variant
	control      *variant
	totalWeight  float64

	cache   cache.Cache // nil: outcomes go to the metrics only
	ttl     time.Duration
	log     *slog.Logger
	metrics *metrics
	// random draws the variant of a request without a subject; tests replace it.
	random func() float64

	writes sync.WaitGroup // counter writes in flight
}

// variant is one arm of the experiment, with everything it applies resolved at
// start-up.
type variant struct {
	name    string
	weight  float64
	control bool
	// overrides are copied into each request's exchange. The values they point to
	// are shared by every request of the variant and must not be modified.
	overrides interceptors.Overrides
	// edits are the body fields the variant sets, in a fixed order.
	edits []bodyEdit
	// key and forcedKey hold its counters (forced requests apart).
	key, forcedKey string
	metrics        variantMetrics
}

// bodyEdit sets one top-level request field to a raw JSON value.
type bodyEdit struct {
	field string
	raw   []byte
}

// New builds a route's experiment from its config: it validates it, reads the
// variants' prompt files, checks their knowledge sets against deps.Library (they
// must belong to the route's pack, deps.Pack) and that the route's chain (route:
// the other stages, built already; nil: none) has a stage for every override.
// Every config problem is returned here, each naming its key. Counters go to
// deps.Cache (nil: none are kept, the report is empty); metrics are registered
// on deps.Metrics (nil: none).
func New(cfg Config, deps interceptors.Deps, route interceptors.StageView) (*Experiment, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Experiment{
		route:        deps.Route,
		name:         cfg.Name,
		salt:         cfg.Salt,
		allowForcing: cfg.AllowForcing,
		byName:       make(map[string]*variant, len(cfg.Variants)),
		cache:        deps.Cache,
		ttl:          cfg.CountersTTL.Std(),
		log:          deps.Log,
		random:       rand.Float64,
	}
	if e.salt == "" {
		e.salt = cfg.Name
	}
	if e.ttl == 0 {
		e.ttl = DefaultCountersTTL
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.metrics = newMetrics(deps.Metrics)
	stages := stagesOf(route)
	var errs []error
	for i := range cfg.Variants {
		vc := &cfg.Variants[i]
		where := variantPath(i, vc.Name)
		v, verrs := e.buildVariant(vc, where, deps, stages)
		errs = append(errs, verrs...)
		if v == nil {
			continue
		}
		v.control = vc.Name == cfg.Control
		e.variants = append(e.variants, v)
		e.byName[v.name] = v
		e.totalWeight += v.weight
		if v.control {
			e.control = v
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return e, nil
}

// buildVariant resolves one variant: its overrides, body edits, files, keys and
// metrics. It returns the variant (nil when it cannot be built) and every problem.
func (e *Experiment) buildVariant(vc *VariantConfig, where string, deps interceptors.Deps, stages routeStages) (*variant, []error) {
	errs := vc.checkStages(where, stages, deps.Pack != nil)
	v := &variant{
		name:   vc.Name,
		weight: vc.Weight,
		overrides: interceptors.Overrides{
			Variant:      vc.Name,
			Experiment:   e.name,
			KnowledgeSet: vc.KnowledgeSet,
			Validate:     vc.Validate,
			MaxRevisions: vc.MaxRevisions,
			Threshold:    vc.RevisionThreshold,
			Notice:       vc.Notice,
		},
		key:       counterKey(e.route, e.name, vc.Name, false),
		forcedKey: counterKey(e.route, e.name, vc.Name, true),
	}
	if n := vc.Notice; n != nil && *n != string(interceptors.NoticeNone) && stages.revise && deps.Pack != nil &&
		(deps.Pack.Revision == nil || deps.Pack.Revision.NoticeTmpl == nil) {
		errs = append(errs, fmt.Errorf("%s.notice: %s needs a notice template, and pack %s has none (revision.notice_template in its pack.yaml)", where, *n, deps.Pack.Name))
	}
	if vc.KnowledgeSet != "" && deps.Pack != nil {
		if err := checkKnowledgeSet(vc.KnowledgeSet, deps); err != nil {
			errs = append(errs, fmt.Errorf("%s.knowledge_set: %w", where, err))
		}
	}
	if vc.UseCustomSystemPrompt {
		text := vc.CustomSystemPrompt
		if vc.CustomSystemPromptFile != "" {
			var err error
			if text, err = readPromptFile(where, "custom_system_prompt_file", vc.CustomSystemPromptFile, deps.ResolvePath); err != nil {
				errs = append(errs, err)
			}
		}
		v.overrides.CustomPrompt = &text
	}
	switch {
	case vc.AdditionalRules != nil:
		rules := *vc.AdditionalRules
		v.overrides.AdditionalRules = &rules
	case vc.AdditionalRulesFile != "":
		rules, err := readPromptFile(where, "additional_rules_file", vc.AdditionalRulesFile, deps.ResolvePath)
		if err != nil {
			errs = append(errs, err)
		}
		v.overrides.AdditionalRules = &rules
	}
	if vc.Model != "" {
		raw, _ := json.Marshal(vc.Model)
		v.edits = append(v.edits, bodyEdit{"model", raw})
	}
	if vc.Temperature != nil {
		v.edits = append(v.edits, bodyEdit{"temperature", strconv.AppendFloat(nil, *vc.Temperature, 'g', -1, 64)})
	}
	if vc.TopP != nil {
		v.edits = append(v.edits, bodyEdit{"top_p", strconv.AppendFloat(nil, *vc.TopP, 'g', -1, 64)})
	}
	if vc.MaxTokens != nil {
		v.edits = append(v.edits, bodyEdit{"max_tokens", strconv.AppendInt(nil, int64(*vc.MaxTokens), 10)})
	}
	for _, k := range sortedKeys(vc.Sampling) {
		if _, reserved := reservedFields[k]; reserved || !fieldPattern.MatchString(k) {
			continue // reported by validate
		}
		raw, err := json.Marshal(vc.Sampling[k])
		if err != nil {
			continue // reported by validate
		}
		v.edits = append(v.edits, bodyEdit{k, raw})
	}
	v.metrics = e.metrics.forVariant(e.route, e.name, v.name)
	if len(errs) > 0 {
		return nil, errs
	}
	return v, nil
}

// checkKnowledgeSet reports a knowledge set that is not a set of the route's pack.
func checkKnowledgeSet(name string, deps interceptors.Deps) error {
	if deps.Library != nil {
		set, p := deps.Library.Set(name)
		switch {
		case set == nil:
			return fmt.Errorf("no knowledge set named %q (pack %s has: %s)", name, deps.Pack.Name, strings.Join(deps.Pack.SetNames(), ", "))
		case p != nil && p.Name != deps.Pack.Name:
			return fmt.Errorf("knowledge set %q belongs to pack %s, not to the route's pack %s (which has: %s)", name, p.Name, deps.Pack.Name, strings.Join(deps.Pack.SetNames(), ", "))
		}
		return nil
	}
	if deps.Pack.Set(name) == nil {
		return fmt.Errorf("no knowledge set named %q (pack %s has: %s)", name, deps.Pack.Name, strings.Join(deps.Pack.SetNames(), ", "))
	}
	return nil
}

// Name implements interceptors.Interceptor.
func (e *Experiment) Name() string { return "experiment" }

// Route returns the name of the route the experiment runs on.
func (e *Experiment) Route() string { return e.route }

// Experiment returns the experiment's name.
func (e *Experiment) Experiment() string { return e.name }

// Variants returns the variants' names in config order.
func (e *Experiment) Variants() []string {
	out := make([]string, len(e.variants))
	for i, v := range e.variants {
		out[i] = v.name
	}
	return out
}

// Control returns the control variant's name.
func (e *Experiment) Control() string { return e.control.name }

// Wait blocks until the counter writes of the requests finished so far are done
// (a test reading the report; a shutdown uses Cleanup, bounded by its context).
func (e *Experiment) Wait() { e.writes.Wait() }

// assignmentKey stores a request's *assignment in its exchange.
type assignmentKey struct{}

// assignment is what the request phase decided, for the response phase.
type assignment struct {
	variant *variant
	method  Method
	start   time.Time
}

// Assigned returns the variant the exchange was assigned and how, or ok false when
// no experiment ran on it.
func Assigned(ex *interceptors.Exchange) (variant string, method Method, ok bool) {
	a, _ := ex.Value(assignmentKey{}).(*assignment)
	if a == nil {
		return "", "", false
	}
	return a.variant.name, a.method, true
}

// OnRequest implements interceptors.RequestPhase: it assigns and applies the
// variant. It fails open (see Experiment).
func (e *Experiment) OnRequest(_ context.Context, ex *interceptors.Exchange) (err error) {
	a := &assignment{start: time.Now()}
	defer func() {
		if p := recover(); p != nil {
			e.fallback(ex, a, fmt.Errorf("internal error: %v", p))
			err = nil
		}
	}()
	v, method, src, note, err := e.assign(ex)
	if err != nil {
		return err
	}
	if note != "" {
		ex.Trace.Note(note)
	}
	a.variant, a.method = v, method
	if err := e.apply(ex, v); err != nil {
		e.fallback(ex, a, err)
		return nil
	}
	e.assigned(ex, a, e.describe(v, method, src))
	return nil
}

// assign chooses the request's variant; src is where the subject came from (for
// MethodSubject). note, when set, is a remark for the trace (a forcing header
// that was ignored).
func (e *Experiment) assign(ex *interceptors.Exchange) (v *variant, m Method, src SubjectSource, note string, err error) {
	if forced := headerText(ex.Header, HeaderVariant); forced != "" {
		fv, ok := e.byName[forced]
		if len(forced) > 64 {
			forced = forced[:64] + "…" // no variant name is longer; keep the trace and the error short
		}
		switch {
		case !e.allowForcing:
			note = fmt.Sprintf("experiment %s: %s %q ignored: the route does not allow forcing (allow_forcing: false)", e.name, HeaderVariant, forced)
		case !ok:
			ee := interceptors.Errorf(400, "invalid_request_error", "unknown_variant",
				"header %s: experiment %s has no variant %q (variants: %s)", HeaderVariant, e.name, forced, strings.Join(e.Variants(), ", "))
			ee.Param = HeaderVariant
			return nil, "", "", "", ee
		default:
			return fv, MethodForced, "", "", nil
		}
	}
	if subject, src, ok := subjectOf(ex); ok {
		return e.pickBySubject(subject), MethodSubject, src, note, nil
	}
	return e.pickAtRandom(), MethodRandom, "", note, nil
}

// apply puts the variant's overrides on the exchange and sets its body fields. It
// changes nothing when a body edit fails.
func (e *Experiment) apply(ex *interceptors.Exchange, v *variant) error {
	body := ex.Body
	for _, ed := range v.edits {
		b, err := sjson.SetRawBytes(body, ed.field, ed.raw)
		if err != nil {
			return fmt.Errorf("variant %s: setting the request's %s: %w", v.name, ed.field, err)
		}
		body = b
	}
	ex.Body = body
	ex.Overrides = v.overrides
	return nil
}

// fallback assigns the control after a failure (fail-open) and notes why.
func (e *Experiment) fallback(ex *interceptors.Exchange, a *assignment, cause error) {
	a.variant, a.method = e.control, MethodFallback
	why := fmt.Sprintf("experiment %s: assignment failed, the control %s was assigned: %v", e.name, e.control.name, cause)
	if err := e.apply(ex, e.control); err != nil {
		ex.Overrides = e.control.overrides
		why += fmt.Sprintf("; its request fields were not set either: %v", err)
	}
	e.log.Warn("experiment assignment failed; control assigned", "route", e.route, "experiment", e.name, "error", cause.Error())
	e.assigned(ex, a, why)
}

// assigned records the assignment: in the exchange, the trace, the response
// header and the metrics.
func (e *Experiment) assigned(ex *interceptors.Exchange, a *assignment, note string) {
	ex.SetValue(assignmentKey{}, a)
	ex.SetHeader(HeaderVariant, a.variant.name)
	ex.Trace.Do(func(t *interceptors.Trace) {
		t.Variant = a.variant.name
		t.Notes = append(t.Notes, note)
	})
	a.variant.metrics.assigned(a.method)
}

// describe is the trace's note about an assignment.
func (e *Experiment) describe(v *variant, m Method, src SubjectSource) string {
	switch m {
	case MethodForced:
		return fmt.Sprintf("experiment %s: variant %s, forced by %s (counted apart from the experiment's statistics)", e.name, v.name, HeaderVariant)
	case MethodSubject:
		return fmt.Sprintf("experiment %s: variant %s, by the subject from %s", e.name, v.name, src)
	default:
		return fmt.Sprintf("experiment %s: variant %s, at random by weight (the request names no subject)", e.name, v.name)
	}
}

// OnResponse implements interceptors.ResponsePhase: it counts the outcome of the
// request, as every other stage left it. It never fails the request.
func (e *Experiment) OnResponse(_ context.Context, ex *interceptors.Exchange) error {
	a, _ := ex.Value(assignmentKey{}).(*assignment)
	if a == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			ex.Trace.Note(fmt.Sprintf("experiment %s: counting the outcome failed: %v", e.name, p))
			e.log.Error("experiment: counting the outcome failed", "route", e.route, "experiment", e.name, "panic", fmt.Sprint(p))
		}
	}()
	o := observe(ex, time.Since(a.start))
	a.variant.metrics.observe(o)
	key := a.variant.key
	if a.method == MethodForced {
		key = a.variant.forcedKey
	}
	e.count(key, o.deltas())
	return nil
}

// OnFailure implements interceptors.FailurePhase: a request that factgate ended
// with a server error inside the experiment (a fail-closed validator's 502 or 504)
// is counted as an error outcome of its variant. Client errors (4xx) and clients
// that went away say nothing about the variant and are not counted.
func (e *Experiment) OnFailure(_ context.Context, ex *interceptors.Exchange, err *interceptors.Error) {
	a, _ := ex.Value(assignmentKey{}).(*assignment)
	if a == nil || err == nil || err.Status < 500 {
		return
	}
	o := observe(ex, time.Since(a.start))
	o.outcome, o.triggered = OutcomeError, false
	a.variant.metrics.observe(o)
	key := a.variant.key
	if a.method == MethodForced {
		key = a.variant.forcedKey
	}
	e.count(key, o.deltas())
}

// counterWriteTimeout bounds one background counter write.
const counterWriteTimeout = 5 * time.Second

// count adds deltas to the counters under key, in the background: the client's
// answer does not wait for the cache. A failed write is logged and counted.
func (e *Experiment) count(key string, deltas map[string]int64) {
	if e.cache == nil {
		return
	}
	e.writes.Add(1)
	go func() {
		defer e.writes.Done()
		ctx, cancel := context.WithTimeout(context.Background(), counterWriteTimeout)
		defer cancel()
		if err := e.cache.HashIncr(ctx, key, deltas, e.ttl); err != nil {
			e.metrics.writeErrors.WithLabelValues(e.route, e.name).Inc()
			e.log.Warn("experiment: storing the outcome counters failed", "route", e.route, "experiment", e.name, "key", key, "error", err)
		}
	}()
}

// counterKeyPrefix starts every experiment counter key.
const counterKeyPrefix = "experiment:"

// counterKey is the key of one variant's counter hash. Every key of one experiment
// carries the same hash tag, so that they share a Redis Cluster slot.
func counterKey(route, experiment, variant string, forced bool) string {
	k := counterKeyPrefix + cache.HashTag(route+"/"+experiment) + ":" + variant
	if forced {
		k += ":forced"
	}
	return k
}

// Cleanup implements interceptors.Cleaner: it waits for the counter writes in
// flight, so that a shutdown right after the last answer still counts it, or
// for ctx to end.
func (e *Experiment) Cleanup(ctx context.Context) error {
	return interceptors.Wait(ctx, &e.writes)
}

// HoldsAnswer implements interceptors.AnswerHolder: the experiment counts how a
// request ended, its usage included, and reads no answer.
func (e *Experiment) HoldsAnswer(*interceptors.Exchange) bool { return false }

var (
	_ interceptors.RequestPhase  = (*Experiment)(nil)
	_ interceptors.ResponsePhase = (*Experiment)(nil)
	_ interceptors.AnswerHolder  = (*Experiment)(nil)
	_ interceptors.FailurePhase  = (*Experiment)(nil)
	_ interceptors.Cleaner       = (*Experiment)(nil)
)
