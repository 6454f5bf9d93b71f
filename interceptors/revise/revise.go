package revise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// CodeLeak is the issue a revised answer gets when it betrays the revision or
// apologises (PRODUCT.md §8).
const CodeLeak = "revision.leak"

// ValidatorName is the Validator of the issues this package reports.
const ValidatorName = "revise"

// Header names set on the client's response.
const (
	HeaderRevisions = "X-Factgate-Revisions"
	HeaderIssues    = "X-Factgate-Issues"
)

// Options wire the revision step to the rest of the route's chain.
type Options struct {
	// Strip is the route's strip_claims mode (the validate stage's, read through
	// interceptors.ValidationPolicy). "" means StripAuto.
	Strip StripMode
	// ContractInjected reports whether the inject stage put the claims contract
	// into the exchange's request (Exchange.ContractInjected). Nil means "never",
	// so under StripAuto the claims block is always kept.
	ContractInjected func(ex *interceptors.Exchange) bool
}

// Revise is the hidden revision (PRODUCT.md §9): a response phase that runs after
// validation, sees the draft's issues in ex.Issues and, when one reaches the
// threshold, has the model revise its answer — bounded in calls and time — then
// returns the best attempt, downgraded where flags remain, as if it were the first,
// with a notice to the reader naming what survived into its text.
//
// It fails open: no failure of a hidden call (timeout, non-2xx status, malformed
// or empty answer) fails the client's request; the best attempt so far is returned
// and the trace says why. Only a client that went away (ctx cancelled) ends the
// request with the context's error. It is safe for concurrent use.
type Revise struct {
	route    string
	pack     *knowledge.Pack
	parser   *claims.Parser // nil when the pack has no claims contract
	cfg      settings
	strip    StripMode
	injected func(*interceptors.Exchange) bool
	leaks    []string // lower-cased leak phrases
	// leakIndex maps leaks to the pack's LeakPhrases (as written).
	leakIndex []int
	metrics   *routeMetrics
	log       *slog.Logger
	// maxJSONDepth bounds the hidden answers read (deps.MaxJSONDepth).
	maxJSONDepth int
}

// New builds the revision step of a route from its config (nil: every default)
// and the route's pack, which must have a revision template; the pack's claims
// contract, when it has one, is what downgrades and stripping edit. Metrics are
// registered on deps.Metrics (nil: none).
func New(cfg *Config, deps interceptors.Deps, opts Options) (*Revise, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Pack == nil {
		return nil, errors.New("the hidden revision needs the route's pack (set pack:)")
	}
	if deps.Pack.Revision == nil || deps.Pack.Revision.Tmpl == nil {
		return nil, fmt.Errorf("pack %s has no revision template (revision.template in its pack.yaml)", deps.Pack.Name)
	}
	if !opts.Strip.valid() {
		return nil, fmt.Errorf("strip_claims: unknown mode %q (want auto, always or never)", string(opts.Strip))
	}
	hasNotice := deps.Pack.Revision.NoticeTmpl != nil
	if m := cfg.settings().notice; (m == NoticeAppend || m == NoticeHeader) && !hasNotice {
		return nil, fmt.Errorf("notice: %s needs a notice template, and pack %s has none (revision.notice_template in its pack.yaml); use none", m, deps.Pack.Name)
	}
	r := &Revise{
		route:        deps.Route,
		pack:         deps.Pack,
		cfg:          cfg.settings(),
		strip:        opts.Strip,
		injected:     opts.ContractInjected,
		metrics:      &routeMetrics{metrics: newMetrics(deps.Metrics), route: deps.Route},
		log:          deps.Log,
		maxJSONDepth: deps.MaxJSONDepth,
	}
	if r.strip == "" {
		r.strip = StripAuto
	}
	if r.cfg.notice == "" {
		r.cfg.notice = NoticeNone
		if hasNotice {
			r.cfg.notice = NoticeAppend
		}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if deps.Pack.Claims != nil {
		var evidence map[string][]string
		if deps.Pack.Facts != nil {
			evidence = deps.Pack.Facts.Evidence
		}
		p, err := claims.NewParser(deps.Pack.Claims, evidence)
		if err != nil {
			return nil, fmt.Errorf("pack %s: %w", deps.Pack.Name, err)
		}
		r.parser = p
	}
	for i, ph := range deps.Pack.Revision.LeakPhrases {
		if ph = strings.ToLower(strings.TrimSpace(ph)); ph != "" {
			r.leaks = append(r.leaks, ph)
			r.leakIndex = append(r.leakIndex, i)
		}
	}
	return r, nil
}

// Name implements interceptors.Interceptor.
func (r *Revise) Name() string { return "revise" }

// attempt is one answer of the request: the draft, a revision or the repair.
type attempt struct {
	kind    string
	content string
	issues  []interceptors.Issue
	counts  interceptors.SeverityCounts
	leaked  bool
	// trace is the attempt's index in the trace's attempts.
	trace int
	// excluded says why the attempt may not win ("" when it may): it dropped
	// claims that were not flagged.
	excluded string
	// added are the Contradictions the attempt has and the reference did not
	// ("code at path"); each weighs NewContradictionWeight in the order.
	added []string
	// finish is the attempt's finish_reason ("" for the draft: kept as it is).
	finish string
}

// run is the state of the revision of one choice of a request's answer.
type run struct {
	r        *Revise
	ex       *interceptors.Exchange
	cfg      settings
	deadline time.Time
	// choice is the index of the choice revised; several reports that the answer
	// has more than one.
	choice  int
	several bool
	// reference is what later attempts are compared with: the draft, or the
	// repaired draft when the draft had no claims block.
	reference *attempt
	// flagged are the claims (paths) of the reference the revision requests name;
	// the other claims must survive a revision.
	flagged map[string]bool
	// kept are the identities of the reference's unflagged claims.
	kept     []claimIdentity
	attempts []*attempt
	// draftOnly backs attempts while it holds the draft alone (an accepted
	// draft, the usual answer: no allocation for the list).
	draftOnly [1]*attempt
	calls     int   // hidden calls made
	tokens    int64 // tokens of the hidden calls
	failure   string

	// draftAttempt is the draft (see draft).
	draftAttempt attempt
}

// OnResponse implements interceptors.ResponsePhase. Every validated choice of the
// answer (ex.Choices) is revised on its own — its own hidden calls, within the one
// budget of the request — then downgraded and stripped; the headers and the trace
// cover them all.
func (r *Revise) OnResponse(ctx context.Context, ex *interceptors.Exchange) error {
	if ex.Response == nil || !ex.Response.OK() || len(ex.Validators) == 0 {
		return nil
	}
	cfg := r.cfg
	if t := ex.Overrides.Threshold; t != nil {
		cfg.threshold = *t
	}
	if m := ex.Overrides.MaxRevisions; m != nil {
		cfg.maxRevisions = max(0, min(*m, interceptors.MaxRevisionsLimit))
	}
	choices := ex.Choices
	if choices == nil {
		// No stage recorded the choices: the first one, with the exchange's issues.
		draftIssues := ex.DraftIssues
		if draftIssues == nil {
			draftIssues = ex.Issues
		}
		c := interceptors.Choice{DraftIssues: draftIssues, Issues: ex.Issues}
		if ex.Response.HasToolCalls(0) {
			c.Skipped = interceptors.SkipToolCalls
		}
		choices = []interceptors.Choice{c}
	}
	deadline := time.Now().Add(cfg.budget)
	// One choice is the usual answer: its result stays on the stack.
	var one [1]choiceResult
	results := one[:0]
	for i := range choices {
		c := &choices[i]
		if c.Skipped != "" {
			continue
		}
		ru := &run{r: r, ex: ex, cfg: cfg, deadline: deadline, choice: c.Index, several: len(choices) > 1}
		ru.attempts = ru.draftOnly[:0]
		draft := ru.draft(ex.Response.ChoiceContent(c.Index), c.DraftIssues)
		if ru.triggered(draft) {
			ru.setReference(draft)
			// With tracing on, the hidden calls and their validation are under
			// one span per revised choice.
			lctx, span := interceptors.StartSpan(ctx, "factgate.revise")
			err := ru.loop(lctx)
			if span.IsRecording() {
				span.SetAttributes(attribute.Int("factgate.choice", c.Index), attribute.Int("factgate.revisions", ru.calls))
			}
			span.End()
			if err != nil {
				return err
			}
		}
		res := ru.finish(ctx, draft)
		c.Issues, c.Delivered = res.best.issues, res.delivered
		results = append(results, res)
	}
	if len(results) == 0 {
		return nil
	}
	ex.Choices = choices
	ex.CollectIssues()
	var draftCounts, finalCounts, deliveredCounts interceptors.SeverityCounts
	top := results[0]
	var headerNotices []*interceptors.Notice
	var firstNotice *interceptors.Notice
	for _, res := range results {
		draftCounts = draftCounts.Add(res.draft.counts)
		finalCounts = finalCounts.Add(res.best.counts)
		deliveredCounts = deliveredCounts.Add(interceptors.CountSeverities(res.delivered))
		if outcomeRank[res.outcome] > outcomeRank[top.outcome] {
			top = res
		}
		if n := res.notice; n != nil {
			if firstNotice == nil {
				firstNotice = n
			}
			if n.Mode == string(NoticeHeader) {
				headerNotices = append(headerNotices, n)
			}
		}
	}
	ex.SetHeader(HeaderRevisions, strconv.Itoa(ex.Revisions))
	ex.SetHeader(HeaderIssues, interceptors.IssueCountsHeader(draftCounts, finalCounts, deliveredCounts))
	if len(headerNotices) > 0 {
		value, cut := noticeHeader(headerNotices, len(choices) > 1)
		ex.SetHeader(HeaderNotice, value)
		if cut {
			ex.Trace.Note(fmt.Sprintf("revise: the notice is longer than %s allows (%d bytes); the header carries its first lines and \"…\", the trace the whole notice", HeaderNotice, MaxNoticeHeader))
		}
	}
	ex.Trace.Do(func(t *interceptors.Trace) {
		t.Final = &interceptors.FinalOutcome{Choice: top.choice, Attempt: top.best.trace, Outcome: top.outcome,
			Counts: finalCounts.String(), Delivered: deliveredCounts.String(), Notice: top.notice}
		t.Notice = firstNotice
		if len(results) > 1 || len(choices) > 1 {
			for _, res := range results {
				t.Choices = append(t.Choices, interceptors.FinalOutcome{Choice: res.choice, Attempt: res.best.trace, Outcome: res.outcome,
					Counts: res.best.counts.String(), Delivered: interceptors.CountSeverities(res.delivered).String(), Notice: res.notice})
			}
		}
	})
	return nil
}

// outcomeRank orders outcomes by how much they say about the answer, for the
// trace's Final of an answer with several choices.
var outcomeRank = map[string]int{interceptors.OutcomeAccepted: 0, interceptors.OutcomeResolved: 1, interceptors.OutcomeImproved: 2, interceptors.OutcomeDowngraded: 3, interceptors.OutcomeFailed: 4}

// choiceResult is what the revision of one choice ended with.
type choiceResult struct {
	choice      int
	outcome     string
	draft, best *attempt
	// delivered are the issues of the answer as sent (after the downgrade).
	delivered []interceptors.Issue
	// notice is the choice's notice (nil when nothing survived).
	notice *interceptors.Notice
}

// triggered reports an issue at or above the threshold. (A revision that leaks is
// revised again too, see loop, but a leak alone never triggers the first one: the
// draft cannot leak.)
func (ru *run) triggered(a *attempt) bool { return a.counts.AtLeast(ru.cfg.threshold) > 0 }

// loop makes the hidden calls: the repair when the claims block is missing, then
// revisions until one resolves every flag, max_revisions is reached, the budget is
// spent, the issues repeat or a call fails. It returns an error only when the
// client went away.
func (ru *run) loop(ctx context.Context) error {
	if ru.cfg.maxRevisions == 0 || ru.ex.Upstream == nil {
		reason := "max_revisions is 0"
		if ru.ex.Upstream == nil {
			reason = "no upstream to call"
		}
		ru.ex.Trace.Note("revise: " + ru.prefix() + "no hidden call (" + reason + "); flagged claims are downgraded")
		return nil
	}
	basis := ru.reference
	if missingClaims(basis) {
		if ru.r.pack.Revision.RepairTmpl == nil {
			ru.ex.Trace.Note("revise: " + ru.prefix() + "the claims block is missing and pack " + ru.r.pack.Name + " has no repair template; revising instead")
		} else {
			a, err := ru.repair(ctx, basis)
			if err != nil {
				return err
			}
			if a == nil {
				return nil
			}
			if a.excluded == "" && !missingClaims(a) {
				ru.setReference(a)
				basis = a
			}
		}
	}
	for revisions := 0; revisions < ru.cfg.maxRevisions && (ru.triggered(basis) || basis.leaked); revisions++ {
		if !time.Now().Before(ru.deadline) {
			ru.ex.Trace.Note(fmt.Sprintf("revise: the budget of %s is spent; no further revision", ru.cfg.budget))
			return nil
		}
		a, err := ru.revise(ctx, basis)
		if err != nil {
			return err
		}
		if a == nil {
			return nil
		}
		if sameKeys(ru.listed(a), ru.listed(basis)) {
			ru.ex.Trace.Note("revise: " + ru.prefix() + "the revision has the same issues as the answer it revised; stopping")
			return nil
		}
		// Building on an attempt that dropped claims would compound the loss: the
		// next revision starts again from the last one that kept them. (One that
		// added contradictions is revised on: the next request lists them.)
		if a.excluded == "" {
			basis = a
		}
	}
	return nil
}

// missingClaims reports a Fatal claims.missing issue: the answer has no claims block.
func missingClaims(a *attempt) bool {
	for _, is := range a.issues {
		if is.Code == claims.CodeMissing && is.Severity == interceptors.Fatal {
			return true
		}
	}
	return false
}

// draft records the first answer.
func (ru *run) draft(content string, issues []interceptors.Issue) *attempt {
	// The run is on the heap already (attempts points into it): the draft
	// lives in it.
	a := &ru.draftAttempt
	*a = attempt{kind: interceptors.KindDraft, content: content, issues: issues, counts: interceptors.CountSeverities(issues), trace: -1}
	ex := ru.ex
	ex.Trace.Do(func(t *interceptors.Trace) {
		// The validator may have recorded the draft already.
		for i, at := range t.Attempts {
			if at.Kind == interceptors.KindDraft && at.Choice == ru.choice {
				a.trace = i
				return
			}
		}
		t.Attempts = append(t.Attempts, interceptors.Attempt{
			Kind:         interceptors.KindDraft,
			Choice:       ru.choice,
			Issues:       issues,
			Counts:       a.counts.String(),
			RequestBytes: len(ex.Body),
			Duration:     units.Millis(ex.Response.Duration),
			Usage:        ex.Response.Usage(),
			Content:      content,
		})
		a.trace = len(t.Attempts) - 1
	})
	ru.attempts = append(ru.attempts, a)
	return a
}

// setReference makes a the attempt later ones are compared with.
func (ru *run) setReference(a *attempt) {
	ru.reference = a
	ru.flagged = map[string]bool{}
	for _, is := range ru.listed(a) {
		if p := claims.ClaimPath(is.Path); p != "" {
			ru.flagged[p] = true
		}
	}
	ru.kept = ru.r.identities(a.content, ru.flagged)
}

// listFloor is the least severe issue a revision request lists: WeakEvidence
// (Info issues are diagnostics only), or the threshold when it is lower.
func (ru *run) listFloor() interceptors.Severity {
	return min(ru.cfg.threshold, interceptors.WeakEvidence)
}

// listed returns the issues of a that a revision request names, most severe
// first (in the validator's order within one severity).
func (ru *run) listed(a *attempt) []interceptors.Issue {
	floor := ru.listFloor()
	out := make([]interceptors.Issue, 0, len(a.issues))
	for s := interceptors.Fatal; s >= floor; s-- {
		for _, is := range a.issues {
			if is.Severity == s {
				out = append(out, is)
			}
		}
	}
	return out
}

// sameKeys reports two issue lists with the same set of keys.
func sameKeys(a, b []interceptors.Issue) bool {
	set := make(map[string]int, len(a))
	for _, is := range a {
		set[is.Key()] |= 1
	}
	for _, is := range b {
		set[is.Key()] |= 2
	}
	for _, v := range set {
		if v != 3 {
			return false
		}
	}
	return true
}

// revise makes one revision call built from the original request and basis. It
// returns nil (and records why) when the call failed, and an error only when the
// client went away.
func (ru *run) revise(ctx context.Context, basis *attempt) (*attempt, error) {
	data := ru.revisionData(basis)
	turn, err := ru.r.pack.RenderRevision(data)
	if err != nil {
		ru.fail(fmt.Sprintf("rendering the revision request: %v", err))
		return nil, nil
	}
	body, err := revisionBody(ru.ex.Body, basis.content, turn)
	if err != nil {
		ru.fail(fmt.Sprintf("building the revision request: %v", err))
		return nil, nil
	}
	content, resp, ok, err := ru.call(ctx, interceptors.KindRevision, body)
	if !ok {
		return nil, err
	}
	return ru.record(ctx, interceptors.KindRevision, content, resp, len(body))
}

// repair asks only for the missing claims block of basis and appends it.
func (ru *run) repair(ctx context.Context, basis *attempt) (*attempt, error) {
	turn, err := ru.r.pack.RenderRepair(knowledge.RevisionData{Marker: ru.marker()})
	if err != nil {
		ru.fail(fmt.Sprintf("rendering the repair request: %v", err))
		return nil, nil
	}
	body, err := revisionBody(ru.ex.Body, basis.content, turn)
	if err != nil {
		ru.fail(fmt.Sprintf("building the repair request: %v", err))
		return nil, nil
	}
	reply, resp, ok, err := ru.call(ctx, interceptors.KindRepair, body)
	if !ok {
		return nil, err
	}
	combined, found := ru.r.appendClaims(basis.content, reply)
	if !found {
		ru.ex.Trace.Note("revise: " + ru.prefix() + "the repair answer holds no claims block; the draft is kept")
	}
	return ru.record(ctx, interceptors.KindRepair, combined, resp, len(body))
}

func (ru *run) marker() string {
	if ru.r.parser == nil {
		return ""
	}
	return ru.r.parser.Marker()
}

// call sends one hidden request within the budget. ok is false when it failed;
// err is non-nil only when the client went away.
func (ru *run) call(ctx context.Context, kind string, body []byte) (content string, resp *interceptors.Response, ok bool, err error) {
	ex := ru.ex
	ru.calls++
	ex.Revisions++
	callCtx, cancel := context.WithDeadline(interceptors.WithCallKind(ctx, kind), ru.deadline)
	defer cancel()
	start := time.Now()
	resp, err = ex.Upstream.Complete(callCtx, body)
	elapsed := time.Since(start)
	failed := func(why string) (string, *interceptors.Response, bool, error) {
		a := interceptors.Attempt{Kind: kind, Choice: ru.choice, RequestBytes: len(body), Duration: units.Millis(elapsed), Error: why, Counts: "-"}
		if resp != nil && resp.OK() {
			a.Usage = resp.Usage()
		}
		ex.Trace.AddAttempt(a)
		ru.fail(kind + " call failed: " + why)
		return "", nil, false, nil
	}
	switch {
	case ctx.Err() != nil:
		ex.Trace.AddAttempt(interceptors.Attempt{Kind: kind, Choice: ru.choice, RequestBytes: len(body), Duration: units.Millis(elapsed), Error: "the client went away", Counts: "-"})
		ex.Trace.Note("revise: " + ru.prefix() + "the client went away during the " + kind + "; every call was cancelled")
		return "", nil, false, ctx.Err()
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || callCtx.Err() != nil):
		return failed(fmt.Sprintf("the revision budget of %s was spent waiting for the upstream", ru.cfg.budget))
	case err != nil:
		return failed(err.Error())
	case !resp.OK():
		return failed("the upstream answered with status " + strconv.Itoa(resp.Status))
	}
	// CheckJSON reads the answer as it checks it; rawjson.Check, whose verdict
	// it is, says why an answer fails.
	if valid := resp.CheckJSON(ru.r.maxJSONDepth); !valid && errors.Is(rawjson.Check(resp.Body, ru.r.maxJSONDepth), rawjson.ErrTooDeep) {
		return failed("the upstream's answer nests JSON deeper than server.max_json_depth")
	} else if !valid {
		return failed("the upstream's answer is not valid JSON")
	} else if !resp.HasMessage() {
		// {} or "choices": [] would otherwise pass for an answer with no flags.
		return failed("the upstream's answer has no choice with a message")
	}
	ru.addUsage(resp.Usage())
	content = resp.Content()
	if strings.TrimSpace(content) == "" {
		return failed("the upstream's answer has no content")
	}
	return content, resp, true, nil
}

func (ru *run) addUsage(u interceptors.Usage) {
	ru.ex.Usage = ru.ex.Usage.Add(u)
	ru.tokens += int64(u.TotalTokens)
}

// fail records why the loop stopped on a failure.
func (ru *run) fail(why string) {
	if ru.failure == "" {
		ru.failure = why
	}
	ru.ex.Trace.Note("revise: " + ru.prefix() + why)
}

// record validates a new attempt, checks it for leaks and against the reference,
// and adds it to the trace.
func (ru *run) record(ctx context.Context, kind, content string, resp *interceptors.Response, requestBytes int) (*attempt, error) {
	ex := ru.ex
	// The budget covers validating the attempt too (an LLM-backed validator's
	// call); a validator cut off by it counts as one that could not run. The cause
	// tells the validator the budget, not the client, ended its call.
	vctx, cancel := context.WithDeadlineCause(ctx, ru.deadline, interceptors.ErrBudgetExhausted)
	issues, errs := ex.ValidateAnswer(vctx, content)
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if len(errs) > 0 {
		ex.Trace.Do(func(t *interceptors.Trace) { t.ValidationIncomplete = true })
		for _, err := range errs {
			ex.Trace.Note("revise: " + ru.prefix() + "validating the " + kind + ": " + err.Error())
		}
	}
	a := &attempt{kind: kind, content: content, finish: gjson.GetBytes(resp.Body, "choices.0.finish_reason").Str}
	if kind == interceptors.KindRevision {
		if phrase, ok := ru.r.leak(ru.attempts[0].content, content); ok {
			a.leaked = true
			issues = append(issues, ru.r.leakIssue(phrase))
		}
	}
	a.issues = issues
	a.counts = interceptors.CountSeverities(issues)
	a.added = ru.added(a)
	a.excluded = ru.exclusion(a)
	if len(a.added) > 0 {
		ex.Trace.Note(fmt.Sprintf("revise: %sthe %s has %d Contradiction(s) the %s did not have (%s); each weighs %d in the choice of the attempt to deliver",
			ru.prefix(), kind, len(a.added), ru.reference.kind, strings.Join(a.added, ", "), NewContradictionWeight))
	}
	a.trace = ex.Trace.AddAttempt(interceptors.Attempt{
		Kind:         kind,
		Choice:       ru.choice,
		Issues:       issues,
		Counts:       a.counts.String(),
		RequestBytes: requestBytes,
		Duration:     units.Millis(resp.Duration),
		Usage:        resp.Usage(),
		Leaked:       a.leaked,
		Content:      content,
		Error:        a.excluded,
	})
	ru.attempts = append(ru.attempts, a)
	return a, nil
}

// added returns the Contradictions a has that the reference did not have
// ("code at path"), by issue key (code, severity and the claim's identity, so a
// claim that moved is the same claim). A repair, and any attempt after a reference
// stopped by a Fatal issue (no claims block, a broken one) — never checked by the
// claim rules or the LLM-backed validators —, adds none.
func (ru *run) added(a *attempt) []string {
	if a.kind == interceptors.KindRepair || a.counts[interceptors.Contradiction] == 0 {
		return nil
	}
	if m, ok := interceptors.MaxSeverity(ru.reference.issues); ok && m >= interceptors.Fatal {
		return nil
	}
	had := map[string]bool{}
	for _, k := range ru.r.issueKeys(ru.reference.content, ru.reference.issues) {
		had[k] = true
	}
	var added []string
	for i, k := range ru.r.issueKeys(a.content, a.issues) {
		if is := a.issues[i]; is.Severity == interceptors.Contradiction && !had[k] {
			added = append(added, is.Code+" at "+is.Path)
		}
	}
	return added
}

// exclusion says why a may not win: it dropped claims the reference had and
// nobody flagged (the reader would lose what was right).
func (ru *run) exclusion(a *attempt) string {
	if a.kind == interceptors.KindRepair {
		return ""
	}
	if lost := ru.r.dropped(ru.kept, a.content); len(lost) > 0 {
		return "not eligible: dropped unflagged claims (" + strings.Join(lost, ", ") + ")"
	}
	return ""
}

// NewContradictionWeight is how much a Contradiction that an attempt introduces —
// one whose issue key the draft (the reference) did not have — counts in the
// order the delivered attempt is chosen by, against 1 for a Contradiction the
// draft had already. The revision was asked to fix the issues it lists, not to
// change the rest: a contradiction it introduces is a regression on a statement
// the draft had right, which the reader would not have had with the draft, and a
// sign that the model rewrote what it was not asked to touch, where the rules see
// only part of what can go wrong. Weighed 2, a revision wins on contradictions only
// when it fixes more than twice as many as it introduces (draft 4: fixing 3 and
// adding 1 gives 1 + 2 = 3 and wins; fixing 2 and adding 1 gives 4, a tie the
// draft wins). docs/revision.md, step 6, says the same.
const NewContradictionWeight = 2

// Rank is where an attempt stands in the order the delivered attempt is chosen
// by, compared field by field (lower is better): eligible before excluded
// (dropped unflagged claims), not leaking before leaking, then the counts of
// Fatal, weighted Contradiction (each new one NewContradictionWeight), Warning
// and WeakEvidence issues. Info issues are diagnostics and do not count. Ties go
// to the earlier attempt.
type Rank [6]int

// Compare returns -1 when r is better than o, 1 when worse, 0 on a tie.
func (r Rank) Compare(o Rank) int {
	for i := range r {
		switch {
		case r[i] < o[i]:
			return -1
		case r[i] > o[i]:
			return 1
		}
	}
	return 0
}

// AttemptRank is the Rank of an attempt with counts, newContradictions of them
// new, excluded (it dropped unflagged claims) or leaking.
func AttemptRank(counts interceptors.SeverityCounts, newContradictions int, excluded, leaked bool) Rank {
	b := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	return Rank{b(excluded), b(leaked), counts[interceptors.Fatal],
		counts[interceptors.Contradiction] + (NewContradictionWeight-1)*newContradictions,
		counts[interceptors.Warning], counts[interceptors.WeakEvidence]}
}

func (a *attempt) rank() Rank { return AttemptRank(a.counts, len(a.added), a.excluded != "", a.leaked) }

// best returns the attempt to deliver: the best by Rank, the earlier on a tie.
// The draft is always eligible, never leaks and adds no contradiction, so an
// excluded or leaking attempt never beats it, nor one whose new contradictions
// outweigh what it fixed.
func (ru *run) best() *attempt {
	b := ru.attempts[0]
	for _, a := range ru.attempts[1:] {
		if better(a, b) {
			b = a
		}
	}
	return b
}

func better(a, b *attempt) bool { return a.rank().Compare(b.rank()) < 0 }

// finish picks the choice's returned attempt, downgrades what remains flagged
// (an accepted draft too, under downgrade below_threshold), tells the reader what
// survived (the notice), strips the claims block when the client did not ask for
// it, puts the answer into the response, and counts the choice's outcome in the
// metrics. The headers and the trace's final outcome, which cover every choice,
// are the caller's.
func (ru *run) finish(ctx context.Context, draft *attempt) choiceResult {
	ex := ru.ex
	best := ru.best()
	outcome := interceptors.OutcomeAccepted
	switch {
	case !ru.triggered(draft):
	case !ru.triggered(best):
		outcome = interceptors.OutcomeResolved
	case ru.failure != "":
		outcome = interceptors.OutcomeFailed
	case best != draft && better(best, draft):
		outcome = interceptors.OutcomeImproved
	default:
		outcome = interceptors.OutcomeDowngraded
	}
	content, delivered := best.content, best.issues
	var downgrades []interceptors.Downgrade
	var gone removals
	if outcome != interceptors.OutcomeAccepted || ru.cfg.downgrade == DowngradeBelowThreshold {
		content, delivered, downgrades, gone = ru.settle(ctx, best)
		for i := range downgrades {
			downgrades[i].Choice = ru.choice
		}
	}
	var notice *interceptors.Notice
	if data, named, ok := ru.notice(best, delivered, content, downgrades, gone); ok && ru.r.pack.Revision.NoticeTmpl != nil {
		text, err := ru.r.pack.RenderNotice(data)
		switch {
		case err != nil:
			ex.Trace.Note("revise: " + ru.prefix() + "rendering the notice failed: " + err.Error())
		case text != "":
			mode := ru.noticeMode()
			if mode == NoticeAppend && ru.jsonAnswer() {
				mode = NoticeHeader
			}
			notice = &interceptors.Notice{Choice: ru.choice, Mode: string(mode), Text: text, Issues: named}
			if mode == NoticeAppend {
				content = ru.r.placeNotice(claims.LocationsOf(ex), content, text)
			}
		}
	}
	if ru.stripClaims() {
		content = ru.r.stripClaimsIn(claims.LocationsOf(ex), content)
	}
	if content != draft.content || best != draft {
		if err := ex.Response.SetChoiceContent(ru.choice, content); err != nil {
			ex.Trace.Note("revise: " + ru.prefix() + "replacing the answer failed: " + err.Error())
		} else if best.finish != "" {
			if err := ex.Response.SetChoiceField(ru.choice, "finish_reason", best.finish); err != nil {
				ex.Trace.Note("revise: " + ru.prefix() + "setting the finish reason failed: " + err.Error())
			}
		}
	}
	if len(downgrades) > 0 {
		ex.Trace.Do(func(t *interceptors.Trace) { t.Downgrades = append(t.Downgrades, downgrades...) })
	}
	ru.r.metrics.observe(ru.ex.Overrides.Variant, outcome, ru.calls, ru.tokens, interceptors.CountSeverities(delivered))
	return choiceResult{choice: ru.choice, outcome: outcome, draft: draft, best: best, delivered: delivered, notice: notice}
}

// prefix names the choice in trace notes when the answer has several.
func (ru *run) prefix() string {
	if ru.several {
		return "choice " + strconv.Itoa(ru.choice) + ": "
	}
	return ""
}

// stripClaims reports whether the client's answer loses its claims block.
func (ru *run) stripClaims() bool {
	switch ru.r.strip {
	case StripAlways:
		return true
	case StripNever:
		return false
	}
	return ru.r.injected != nil && ru.r.injected(ru.ex)
}

// HoldsAnswer implements interceptors.AnswerHolder: only a validated answer is
// revised.
func (r *Revise) HoldsAnswer(ex *interceptors.Exchange) bool { return len(ex.Validators) > 0 }

var (
	_ interceptors.Interceptor   = (*Revise)(nil)
	_ interceptors.ResponsePhase = (*Revise)(nil)
	_ interceptors.AnswerHolder  = (*Revise)(nil)
)
