// Package eval measures a route's semantic validators on a labelled set before
// they are turned on for all traffic: false acceptance and rejection, execution
// failures, corrections and regressions, the added calls, latency and tokens.
//
// Each chunk of the set is two cases, sent through the real route — inject, the
// deterministic validators, the judge, the hidden revision — as a client would:
// once with the chunk's labelled value as the producer's first draft, once with a
// wrong one (the label mapping is pack data: knowledge.EvaluationSpec). Only the
// first draft is scripted, by a stage the evaluation adds innermost to the route;
// the judge and revision calls go to the route's real upstreams through the proxy,
// with its own credentials, and every figure is read from the request's trace.
//
// The engine does not import the proxy: the caller (cmd/factgate) builds one from
// the route's config with the engine's stage and hands it over as a Proxy.
package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/semantic"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/knowledge"
)

// Bounds of a run.
const (
	// MaxConcurrency bounds the cases run at once.
	MaxConcurrency = 16
	// DefaultTimeout bounds one case when Options.Timeout is zero.
	DefaultTimeout = 5 * time.Minute
	// traceWait bounds waiting for a case's trace once its answer is complete.
	traceWait = 10 * time.Second
	// maxAnswer bounds the answer of one case.
	maxAnswer = 64 << 20
)

// Proxy is the factgate proxy the cases run through: the route under evaluation
// alone, its chain ending in the stage Options.Start is given, serving on an
// address only this process uses.
type Proxy interface {
	// URL is the proxy's base URL ("http://127.0.0.1:PORT").
	URL() string
	// LoadTrace returns a request's stored trace as JSON (false: not stored).
	LoadTrace(ctx context.Context, id string) ([]byte, bool, error)
	// Close stops the proxy.
	Close() error
}

// Options say what to evaluate.
type Options struct {
	// Pack is the route's pack: its answer shape, and the evaluation block of the
	// first validator.
	Pack *knowledge.Pack
	// Validators are the route's semantic validators, as its semantic block names
	// them. The first one's proposed value and evaluation block label the cases.
	Validators []string
	// Route names the route in the report.
	Route string
	// Model is the model the cases ask for: a model alias of the route.
	Model string
	// Judge and Producer describe the models in the report ("gpt-4o-mini on
	// upstream openai").
	Judge, Producer string
	// Chunks are the labelled chunks (LoadSet); Set names them in the report.
	Chunks []Chunk
	Set    string
	// Concurrency is how many cases run at once (1 to MaxConcurrency; 0 means 1).
	Concurrency int
	// Timeout bounds one case: the draft's validation and its revisions. Zero
	// means DefaultTimeout.
	Timeout time.Duration
	// Start starts the proxy with stage as the route's innermost stage (its
	// request phase answers the scripted drafts). Run closes it.
	Start func(stage interceptors.Interceptor) (Proxy, error)
}

// Spec returns the semantic validator named name of pack and its evaluation
// block, or an error saying why it cannot be evaluated.
func Spec(pack *knowledge.Pack, name string) (*knowledge.SemanticSpec, error) {
	if pack == nil {
		return nil, errors.New("no pack")
	}
	var have []string
	for i := range pack.Semantic {
		s := &pack.Semantic[i]
		have = append(have, s.Name)
		if s.Name != name {
			continue
		}
		if s.Evaluation == nil {
			return nil, fmt.Errorf("pack %s: semantic validator %q has no evaluation block: nothing says how its cases are labelled (docs/semantic.md)", pack.Name, name)
		}
		return s, nil
	}
	return nil, fmt.Errorf("pack %s has no semantic validator %q (have %s)", pack.Name, name, strings.Join(have, ", "))
}

// Run evaluates every chunk of opts twice through the proxy opts.Start starts, and
// computes the figures. A case that could not be evaluated is in the report with
// its error (Report.Errors counts them); the error is for a run that could not
// start, or a cancelled ctx.
func Run(ctx context.Context, opts Options) (*Report, error) {
	switch {
	case len(opts.Validators) == 0:
		return nil, errors.New("no semantic validator to evaluate")
	case len(opts.Chunks) == 0:
		return nil, errors.New("no labelled chunks")
	case opts.Concurrency < 0 || opts.Concurrency > MaxConcurrency:
		return nil, fmt.Errorf("concurrency %d: want 1 to %d", opts.Concurrency, MaxConcurrency)
	case opts.Start == nil || opts.Model == "":
		return nil, errors.New("no proxy to run the cases through")
	}
	spec, err := Spec(opts.Pack, opts.Validators[0])
	if err != nil {
		return nil, err
	}
	if opts.Pack.Answer == nil {
		return nil, fmt.Errorf("pack %s has no answer shape to propose values in", opts.Pack.Name)
	}
	ev := spec.Evaluation
	concurrency := max(opts.Concurrency, 1)
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}

	type evalCase struct {
		id       string
		chunk    Chunk
		proposal string
		proposed string
	}
	var cases []evalCase
	stage := &draftStage{drafts: map[string]string{}}
	for _, c := range opts.Chunks {
		for _, p := range [...]struct{ name, value string }{{ProposalCorrect, c.Correct}, {ProposalWrong, ev.WrongFor(c.Label)}} {
			id := c.ID + "/" + p.name
			draft, err := proposalAnswer(opts.Pack.Answer, spec.Proposed, p.value)
			if err != nil {
				return nil, err
			}
			stage.drafts[id] = draft
			cases = append(cases, evalCase{id: id, chunk: c, proposal: p.name, proposed: p.value})
		}
	}
	px, err := opts.Start(stage)
	if err != nil {
		return nil, fmt.Errorf("starting the proxy: %w", err)
	}
	defer px.Close()
	// Its own connections to the proxy, closed with it.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}
	defer client.CloseIdleConnections()
	r := &runner{px: px, model: opts.Model, spec: spec, timeout: timeout, client: client}

	results := make([]Result, len(cases))
	next := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				c := cases[i]
				results[i] = Result{Chunk: c.chunk.ID, Category: c.chunk.Category, Label: c.chunk.Label, Proposal: c.proposal, Proposed: c.proposed}
				r.run(ctx, c.id, c.chunk, &results[i])
			}
		})
	}
	for i := range cases {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := &Report{
		Set: opts.Set, Route: opts.Route, Validators: opts.Validators, Judge: opts.Judge, Producer: opts.Producer,
		LabelField: ev.Label, LabelName: ev.Name(), ProposedField: spec.Proposed,
		Chunks: len(opts.Chunks), Cases: len(cases), Results: results,
	}
	summarize(rep)
	return rep, nil
}

// runner sends cases through the proxy.
type runner struct {
	px      Proxy
	model   string
	spec    *knowledge.SemanticSpec
	timeout time.Duration
	client  *http.Client
}

// run sends one case as a client would and reads what happened from its trace.
func (r *runner) run(ctx context.Context, id string, chunk Chunk, res *Result) {
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	fail := func(format string, args ...any) {
		res.Draft, res.Error = DraftError, fmt.Sprintf(format, args...)
	}
	body, err := json.Marshal(map[string]any{
		"model":    r.model,
		"messages": []map[string]string{{"role": "user", "content": chunk.Transcript}},
	})
	if err != nil {
		fail("%v", err)
		return
	}
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, r.px.URL()+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		fail("%v", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(CaseHeader, id)
	resp, err := r.client.Do(req)
	if err != nil {
		fail("%v", err)
		return
	}
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	if err != nil {
		fail("reading the answer: %v", err)
		return
	}
	res.Status = resp.StatusCode
	tr, err := r.trace(cctx, resp.Header.Get("X-Factgate-Trace-Id"))
	if err != nil || len(tr.Attempts) == 0 {
		why := "no validated draft"
		if err != nil {
			why = err.Error()
		}
		fail("%s (status %d: %s)", why, resp.StatusCode, bound(string(out), 200))
		return
	}
	measure(tr, res)
	res.Draft = draftOutcome(tr.Attempts[0].Issues)
	if resp.StatusCode != http.StatusOK {
		if gjson.GetBytes(out, "error.code").Str != semantic.ErrorCode {
			res.Error = fmt.Sprintf("status %d: %s", resp.StatusCode, bound(gjson.GetBytes(out, "error.message").Str, 200))
		}
		return
	}
	obj, _ := validate.AnswerObject(gjson.GetBytes(out, "choices.0.message.content").Str)
	res.FinalValue = gjson.Get(obj, r.spec.Proposed).Str
	final := tr.Attempts[len(tr.Attempts)-1].Issues
	if tr.Final != nil && tr.Final.Attempt >= 0 && tr.Final.Attempt < len(tr.Attempts) {
		final = tr.Attempts[tr.Final.Attempt].Issues
	}
	res.FinalAccepted = accepted(final)
	ev := r.spec.Evaluation
	labelRight := res.FinalValue != "" && ev.Agrees(res.FinalValue) == chunk.Label
	switch res.Proposal {
	case ProposalWrong:
		res.Corrected = res.Draft == DraftRejected && labelRight && res.FinalAccepted
		res.Exact = res.Corrected && res.FinalValue == chunk.Correct
	case ProposalCorrect:
		res.Regressed = res.FinalValue != "" && !labelRight
	}
}

// measure reads the added calls of a case from its trace: the judge calls, and
// every attempt after the draft (revisions and repairs, failed ones included).
func measure(tr *interceptors.Trace, res *Result) {
	var added time.Duration
	for _, c := range tr.Calls {
		if c.Kind != "judge" {
			continue
		}
		res.JudgeCalls++
		res.JudgeUsage = res.JudgeUsage.Add(c.Usage)
		res.judgeDurations = append(res.judgeDurations, time.Duration(c.Duration))
		added += time.Duration(c.Duration)
	}
	for _, a := range tr.Attempts[1:] {
		res.RevisionCalls++
		res.RevisionUsage = res.RevisionUsage.Add(a.Usage)
		added += time.Duration(a.Duration)
	}
	res.AddedMs = ms(added)
}

// trace waits for the proxy to store the trace of id and decodes it.
func (r *runner) trace(ctx context.Context, id string) (*interceptors.Trace, error) {
	if id == "" {
		return nil, errors.New("the answer has no trace id")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, traceWait)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		b, ok, err := r.px.LoadTrace(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("reading trace %s: %w", id, err)
		}
		if ok {
			var tr interceptors.Trace
			if err := json.Unmarshal(b, &tr); err != nil {
				return nil, fmt.Errorf("trace %s: %w", id, err)
			}
			return &tr, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("trace %s was not stored (waited %s)", id, time.Since(start).Round(time.Millisecond))
		case <-tick.C:
		}
	}
}

// bound cuts s to n bytes at a rune boundary, with an ellipsis.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
