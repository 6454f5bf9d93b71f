package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/semantic"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/proxy"
)

func init() {
	register("eval", "evaluate a route's semantic validators on a labelled set (false acceptance and rejection, corrections, calls, latency, tokens)", runEval)
}

// The built-in labelled set: the D&D scene-classification chunks (seed 003's
// evaluation categories), human-labelled.
//
//go:embed evaldata/dnd/*.json
var evalDataFS embed.FS

const builtinEvalSet = "evaldata/dnd"

// The set format's combat status: a chunk is labelled active_combat, and a proposal
// says combat when its kind is "combat". The wrong proposal of a chunk flips the
// status: "narrative" for a combat chunk, "combat" for any other.
const (
	combatKind    = "combat"
	nonCombatKind = "narrative"
)

// evalModel is the model name the evaluation's requests use when the route
// rewrites it (upstream_model); a route that forwards the client's model gets its
// first model alias instead, which is then the provider's model name.
const evalModel = "factgate-eval"

// evalCaseHeader names the case a request belongs to; the proxy forwards it to the
// evaluation's upstream shim (never to a provider).
const evalCaseHeader = "X-Eval-Case"

// Exit statuses of factgate eval.
const (
	evalDone       = 0 // the figures were computed for every case
	evalIncomplete = 1 // some case could not be evaluated (it is listed with its error)
	evalUsage      = 2 // bad flags, an unreadable set or config
)

// evalChunk is one labelled chunk of a set (the format of the D&D fixtures).
type evalChunk struct {
	ID           string `json:"id"`
	Category     string `json:"category"`
	ActiveCombat bool   `json:"active_combat"`
	CorrectKind  string `json:"correct_kind"`
	Transcript   string `json:"transcript"`
	Note         string `json:"note"`
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("factgate eval", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprint(stderr, `Usage: factgate eval --config FILE --route NAME [--set DIR] [--json] [--concurrency N]
       factgate eval --base-url URL --model M [--key-env NAME] [--pack NAME] [--validators A,B] [--set DIR] [--json]

Runs a labelled set through a route's semantic validators before they are turned
on for all traffic. Each chunk is sent twice through the route, in process — the
real chain: inject, the deterministic validators, the judge, the hidden revision —
once with the chunk's correct kind as the producer's first draft and once with a
wrong one (the combat status flipped: "narrative" for a combat chunk, "combat"
otherwise). The first draft is scripted; the judge calls and the revision calls go
to the configured upstreams (a provider: this costs tokens).

Figures:
  false acceptance    wrong proposals the judge approved (of the wrong proposals)
  false rejection     correct proposals the judge rejected (of the correct proposals)
  execution failures  drafts the judge gave no valid verdict for after its retries
  corrections         rejected wrong proposals whose revision reached the correct
                      combat status and was accepted by the validators
  regressions         correct proposals whose final answer has the wrong status
  added calls         judge and revision calls (the draft is not counted)
  latency             judge calls p50/p95; added time per case p50/p95
  tokens              judge and revision tokens

With --config the route's upstreams, semantic profile and revision settings are
used (its experiment, auth and cache are not); provider keys come from each
upstream's api_key_env. With --base-url one provider serves the producer and the
judge, keyed by $FACTGATE_EVAL_API_KEY (--key-env); the judge must support strict
structured output (response_format json_schema). Without --set the built-in D&D
set runs (14 chunks). Exit status: 0 done, 1 some case could not be evaluated, 2
usage.

Example:
  FACTGATE_EVAL_API_KEY=sk-... factgate eval --base-url https://api.openai.com/v1 --model gpt-4o-mini

Flags:
`)
		flags.PrintDefaults()
	}
	configFile := flags.String("config", "", "factgate config file with the route to evaluate")
	routeName := flags.String("route", "", "the route to evaluate (with --config)")
	baseURL := flags.String("base-url", "", "OpenAI-compatible API base (with its /v1) for the producer and the judge, instead of --config")
	model := flags.String("model", "", "the model of the producer and the judge (with --base-url)")
	keyEnv := flags.String("key-env", "FACTGATE_EVAL_API_KEY", "environment variable with the provider key (with --base-url)")
	packName := flags.String("pack", "dnd", "the pack whose validators run (with --base-url)")
	validators := flags.String("validators", "", "comma-separated semantic validators of the pack (with --base-url; default: all)")
	setDir := flags.String("set", "", "folder of labelled chunk files (*.json); default: the built-in D&D set")
	asJSON := flags.Bool("json", false, "print the report as JSON")
	concurrency := flags.Int("concurrency", 1, "cases run at once (1 to 16)")
	timeout := flags.Duration("timeout", 5*time.Minute, "bound on one case (the draft's validation and its revisions)")
	if code, done := parseFlags(flags, args); done {
		return code
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "factgate eval: "+format+"\n", args...)
		return evalUsage
	}
	switch {
	case flags.NArg() > 0:
		return fail("unexpected arguments %q", flags.Args())
	case (*configFile == "") == (*baseURL == ""):
		flags.Usage()
		return evalUsage
	case *configFile != "" && *routeName == "":
		return fail("--config needs --route")
	case *baseURL != "" && *model == "":
		return fail("--base-url needs --model")
	case *concurrency < 1 || *concurrency > 16:
		return fail("--concurrency %d: want 1 to 16", *concurrency)
	case *timeout <= 0:
		return fail("--timeout %s: want a positive duration", *timeout)
	}

	var (
		cfg   *proxy.Config
		route string
		keys  = map[string]string{}
		err   error
	)
	if *configFile != "" {
		if cfg, err = proxy.LoadConfig(*configFile); err != nil {
			return fail("%v", err)
		}
		route = *routeName
		for name, u := range cfg.Upstreams {
			if u.APIKeyEnv == "" {
				continue
			}
			if keys[name] = os.Getenv(u.APIKeyEnv); keys[name] == "" {
				fmt.Fprintf(stderr, "factgate eval: warning: $%s (upstreams.%s.api_key_env) is not set; its calls go without a key\n", u.APIKeyEnv, name)
			}
		}
	} else {
		if cfg, err = baseURLConfig(*baseURL, *model, *packName, splitList(*validators)); err != nil {
			return fail("%v", err)
		}
		route = "eval"
		if keys["provider"] = os.Getenv(*keyEnv); keys["provider"] == "" {
			fmt.Fprintf(stderr, "factgate eval: warning: $%s is not set; the provider calls go without a key\n", *keyEnv)
		}
	}
	var fsys fs.FS = evalDataFS
	setName, dir := "built-in D&D set", builtinEvalSet
	if *setDir != "" {
		setName, fsys, dir = *setDir, os.DirFS(*setDir), "."
	}
	chunks, err := loadEvalSet(fsys, dir)
	if err != nil {
		return fail("--set %s: %v", setName, err)
	}
	rep, err := evaluate(ctx, evalOptions{Config: cfg, Route: route, Keys: keys, Chunks: chunks, Set: setName, Concurrency: *concurrency, Timeout: *timeout})
	if err != nil {
		return fail("%v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			return fail("%v", err)
		}
	} else {
		writeEvalReport(stdout, rep)
	}
	if rep.Errors > 0 {
		return evalIncomplete
	}
	return evalDone
}

// baseURLConfig is the one-provider route of --base-url: the pack with inject, the
// deterministic validators, the semantic validators and the revision, defaults
// everywhere.
func baseURLConfig(base, model, pack string, validators []string) (*proxy.Config, error) {
	reg, err := knowledge.Builtin()
	if err != nil {
		return nil, err
	}
	p := reg.Pack(pack)
	if p == nil {
		return nil, fmt.Errorf("--pack: no built-in pack %q", pack)
	}
	if len(validators) == 0 {
		for _, s := range p.Semantic {
			validators = append(validators, s.Name)
		}
	}
	if len(validators) == 0 {
		return nil, fmt.Errorf("--pack %s declares no semantic validators", pack)
	}
	doc := map[string]any{
		"log":       map[string]any{"level": "warn"},
		"upstreams": map[string]any{"provider": map[string]any{"base_url": base}},
		"routes": []any{map[string]any{
			"name": "eval", "models": []string{evalModel}, "upstream": "provider", "upstream_model": model,
			"pack": pack, "inject": map[string]any{}, "validate": map[string]any{},
			"semantic": map[string]any{"validators": validators}, "revise": map[string]any{},
		}},
	}
	b, err := json.Marshal(doc) // JSON is YAML
	if err != nil {
		return nil, err
	}
	return proxy.ParseConfig(b, "--base-url "+base)
}

// loadEvalSet reads every *.json of dir in fsys, in name order, strictly.
func loadEvalSet(fsys fs.FS, dir string) ([]evalChunk, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no *.json chunk files")
	}
	slices.Sort(names)
	var out []evalChunk
	seen := map[string]string{}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var c evalChunk
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("%s: %v", path.Base(name), err)
		}
		switch {
		case c.ID == "":
			return nil, fmt.Errorf("%s: no id", path.Base(name))
		case strings.TrimSpace(c.Transcript) == "":
			return nil, fmt.Errorf("%s (%s): empty transcript", path.Base(name), c.ID)
		case c.CorrectKind == "":
			return nil, fmt.Errorf("%s (%s): no correct_kind", path.Base(name), c.ID)
		case (c.CorrectKind == combatKind) != c.ActiveCombat:
			return nil, fmt.Errorf("%s (%s): correct_kind %q contradicts active_combat %v", path.Base(name), c.ID, c.CorrectKind, c.ActiveCombat)
		case seen[c.ID] != "":
			return nil, fmt.Errorf("%s: id %q is also used by %s", path.Base(name), c.ID, seen[c.ID])
		}
		seen[c.ID] = path.Base(name)
		out = append(out, c)
	}
	return out, nil
}

// evalOptions say what to evaluate.
type evalOptions struct {
	// Config holds the route; its upstreams are where judge and revision calls go.
	Config *proxy.Config
	Route  string
	// Keys are the provider keys by upstream name ("" or absent: no key).
	Keys        map[string]string
	Chunks      []evalChunk
	Set         string
	Concurrency int
	Timeout     time.Duration
}

// evalRate is count of of, and the rate (0 when of is 0).
type evalRate struct {
	Count int     `json:"count"`
	Of    int     `json:"of"`
	Rate  float64 `json:"rate"`
}

func rate(count, of int) evalRate {
	r := evalRate{Count: count, Of: of}
	if of > 0 {
		r.Rate = math.Round(float64(count)/float64(of)*10000) / 10000
	}
	return r
}

// evalLatency is a latency distribution in milliseconds.
type evalLatency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	N   int     `json:"n"`
}

// evalResult is one case: a chunk with one proposal.
type evalResult struct {
	Chunk        string `json:"chunk"`
	Category     string `json:"category"`
	ActiveCombat bool   `json:"active_combat"`
	// Proposal is "correct" or "wrong"; Proposed the kind of the scripted draft.
	Proposal string `json:"proposal"`
	Proposed string `json:"proposed"`
	// Draft is what the validators said of the draft: approved, rejected, failed
	// (an execution failure), malformed (a deterministic Fatal) or error.
	Draft string `json:"draft"`
	// FinalKind is the kind of the answer the client got ("" when it got an error).
	FinalKind string `json:"final_kind,omitempty"`
	// FinalAccepted: the client's answer has no semantic issue and nothing at or
	// above Contradiction.
	FinalAccepted bool `json:"final_accepted"`
	// Corrected: a wrong proposal, rejected, whose final answer has the correct
	// combat status and was accepted; Exact when the kind is the labelled one.
	Corrected bool `json:"corrected"`
	Exact     bool `json:"exact"`
	// Regressed: a correct proposal whose final answer has the wrong status.
	Regressed     bool               `json:"regressed"`
	JudgeCalls    int                `json:"judge_calls"`
	RevisionCalls int                `json:"revision_calls"`
	AddedMs       float64            `json:"added_ms"`
	JudgeUsage    interceptors.Usage `json:"judge_usage"`
	RevisionUsage interceptors.Usage `json:"revision_usage"`
	Status        int                `json:"status"`
	Error         string             `json:"error,omitempty"`
}

// evalReport is the outcome of a run.
type evalReport struct {
	Set        string   `json:"set"`
	Route      string   `json:"route"`
	Validators []string `json:"validators"`
	Judge      string   `json:"judge"`
	Producer   string   `json:"producer"`
	Chunks     int      `json:"chunks"`
	Cases      int      `json:"cases"`

	FalseAcceptance   evalRate `json:"false_acceptance"`
	FalseRejection    evalRate `json:"false_rejection"`
	ExecutionFailures evalRate `json:"execution_failures"`
	Corrections       evalRate `json:"corrections"`
	ExactCorrections  int      `json:"exact_corrections"`
	Regressions       evalRate `json:"regressions"`

	AddedCalls struct {
		Total    int     `json:"total"`
		Judge    int     `json:"judge"`
		Revision int     `json:"revision"`
		PerCase  float64 `json:"per_case"`
	} `json:"added_calls"`
	JudgeLatency evalLatency `json:"judge_latency_ms"`
	AddedLatency evalLatency `json:"added_latency_ms"`
	Tokens       struct {
		Judge    interceptors.Usage `json:"judge"`
		Revision interceptors.Usage `json:"revision"`
		PerCase  float64            `json:"per_case"`
	} `json:"tokens"`

	// Errors counts cases that could not be evaluated.
	Errors  int          `json:"errors"`
	Results []evalResult `json:"results"`
}

// evaluate runs every case of opts through the route in process.
func evaluate(ctx context.Context, opts evalOptions) (*evalReport, error) {
	cfg := opts.Config
	var rc *proxy.RouteConfig
	var names []string
	for i := range cfg.Routes {
		names = append(names, cfg.Routes[i].Name)
		if cfg.Routes[i].Name == opts.Route {
			rc = &cfg.Routes[i]
		}
	}
	switch {
	case rc == nil:
		return nil, fmt.Errorf("--route: no route named %q in %s (have %s)", opts.Route, cfg.File, strings.Join(names, ", "))
	case rc.Interceptors.Semantic == nil:
		return nil, fmt.Errorf("route %s has no semantic block: nothing to evaluate", rc.Name)
	case rc.Interceptors.Validate == nil:
		return nil, fmt.Errorf("route %s has no validate block: its semantic validators never run", rc.Name)
	}
	reg, err := knowledge.LoadRegistry(cfg.Resolve(cfg.Knowledge.PacksDir))
	if err != nil {
		return nil, fmt.Errorf("knowledge: %w", err)
	}
	pack := reg.Pack(rc.Interceptors.Pack)
	if pack == nil || pack.Answer == nil {
		return nil, fmt.Errorf("route %s: pack %q has no answer shape to propose kinds in", rc.Name, rc.Interceptors.Pack)
	}
	spec, err := semantic.NewValidator(pack, firstOr(rc.Interceptors.Semantic.Validators, ""), rc.Interceptors.Semantic.Settings())
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", rc.Name, err)
	}
	proposedPath := spec.Spec().Proposed

	sh := &evalShim{producer: rc.Upstream, targets: map[string]shimTarget{}, drafts: map[string]string{}, calls: map[string][]evalCall{}}
	for name, u := range cfg.Upstreams {
		sh.targets[name] = shimTarget{base: strings.TrimRight(u.BaseURL, "/"), key: opts.Keys[name]}
	}
	sh.client = &http.Client{Timeout: opts.Timeout}
	type evalCase struct {
		id       string
		chunk    evalChunk
		proposal string
		proposed string
	}
	var cases []evalCase
	for _, c := range opts.Chunks {
		wrong := combatKind
		if c.ActiveCombat {
			wrong = nonCombatKind
		}
		for _, p := range [...]struct{ name, kind string }{{"correct", c.CorrectKind}, {"wrong", wrong}} {
			id := c.ID + "/" + p.name
			draft, err := proposalAnswer(pack.Answer, proposedPath, p.kind)
			if err != nil {
				return nil, err
			}
			sh.drafts[id] = draft
			cases = append(cases, evalCase{id: id, chunk: c, proposal: p.name, proposed: p.kind})
		}
	}
	shimLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	shimSrv := &http.Server{Handler: sh, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = shimSrv.Serve(shimLn) }()
	defer shimSrv.Close()

	// The evaluation's proxy: the route alone, its upstreams behind the shim.
	ecfg := *cfg
	ecfg.Upstreams = map[string]proxy.UpstreamConfig{}
	for name, u := range cfg.Upstreams {
		u.BaseURL = "http://" + shimLn.Addr().String() + "/u/" + url.PathEscape(name) + "/v1"
		u.APIKeyEnv = ""
		ecfg.Upstreams[name] = u
	}
	clientModel := evalModel
	if rc.UpstreamModel == "" {
		if len(rc.Models) == 0 {
			return nil, fmt.Errorf("route %s has neither upstream_model nor models: the evaluation cannot tell which model the producer is", rc.Name)
		}
		clientModel = rc.Models[0]
	}
	erc := *rc
	erc.Models, erc.Default = []string{clientModel}, false
	erc.Interceptors.Experiment = nil
	ecfg.Routes = []proxy.RouteConfig{erc}
	ecfg.Auth = proxy.AuthConfig{Mode: "passthrough"}
	ecfg.Server.DrainGrace = nil // no load balancer watches this in-process proxy
	ecfg.Cache.Redis = nil
	if err := ecfg.Validate(); err != nil {
		return nil, err
	}
	traces := newEvalTraces()
	srv, err := proxy.New(&ecfg, proxy.WithLogger(slog.New(slog.DiscardHandler)), proxy.WithTraceStore(traces))
	if err != nil {
		return nil, err
	}
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() { _ = srv.Serve(proxyLn) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	endpoint := "http://" + proxyLn.Addr().String() + "/v1/chat/completions"

	results := make([]evalResult, len(cases))
	next := make(chan int)
	var wg sync.WaitGroup
	for range opts.Concurrency {
		wg.Go(func() {
			for i := range next {
				c := cases[i]
				r := evalResult{Chunk: c.chunk.ID, Category: c.chunk.Category, ActiveCombat: c.chunk.ActiveCombat, Proposal: c.proposal, Proposed: c.proposed}
				runEvalCase(ctx, endpoint, clientModel, c.id, c.chunk, proposedPath, traces, opts.Timeout, &r)
				for _, call := range sh.callsOf(c.id) {
					r.AddedMs += ms(call.duration)
					switch call.kind {
					case "judge":
						r.JudgeCalls++
						r.JudgeUsage = r.JudgeUsage.Add(call.usage)
					case "revision":
						r.RevisionCalls++
						r.RevisionUsage = r.RevisionUsage.Add(call.usage)
					}
				}
				results[i] = r
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

	rep := &evalReport{
		Set: opts.Set, Route: rc.Name, Validators: rc.Interceptors.Semantic.Validators,
		Judge: describeProfile(rc, rc.Interceptors.Semantic.Settings()), Producer: describeProfile(rc, semantic.Settings{}),
		Chunks: len(opts.Chunks), Cases: len(cases), Results: results,
	}
	summarize(rep, sh.judgeDurations())
	return rep, nil
}

func firstOr(list []string, def string) string {
	if len(list) > 0 {
		return list[0]
	}
	return def
}

// describeProfile names a model on an upstream ("gpt-4o-mini on upstream openai").
func describeProfile(rc *proxy.RouteConfig, s semantic.Settings) string {
	model, up := s.Model, s.Upstream
	if model == "" {
		model = rc.UpstreamModel
	}
	if model == "" && len(rc.Models) > 0 {
		model = rc.Models[0]
	}
	if up == "" {
		up = rc.Upstream
	}
	return model + " on upstream " + up
}

// proposalAnswer is the scripted first draft: the answer shape's fields, the
// proposed value at its path, placeholders elsewhere.
func proposalAnswer(shape *knowledge.AnswerShape, proposedPath, kind string) (string, error) {
	fields := make([]string, 0, len(shape.Fields))
	for f := range shape.Fields {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	doc := []byte("{}")
	var err error
	for _, f := range fields {
		var v any = "A scene description proposed for evaluation."
		switch shape.Fields[f] {
		case "number":
			v = 0
		case "boolean":
			v = false
		}
		if doc, err = sjson.SetBytes(doc, gjson.Escape(f), v); err != nil {
			return "", err
		}
	}
	if doc, err = sjson.SetBytes(doc, proposedPath, kind); err != nil {
		return "", fmt.Errorf("setting the proposed value at %q: %w", proposedPath, err)
	}
	return string(doc), nil
}

// runEvalCase sends one case through the proxy and reads its trace.
func runEvalCase(ctx context.Context, endpoint, model, id string, chunk evalChunk, proposedPath string, traces *evalTraces, timeout time.Duration, r *evalResult) {
	body, _ := json.Marshal(map[string]any{
		"model":    model,
		"messages": []map[string]string{{"role": "user", "content": chunk.Transcript}},
	})
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		r.Draft, r.Error = "error", err.Error()
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(evalCaseHeader, id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.Draft, r.Error = "error", err.Error()
		return
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.Status = resp.StatusCode
	tr, ok := traces.wait(cctx, resp.Header.Get("X-Factgate-Trace-Id"))
	if !ok || len(tr.Attempts) == 0 {
		r.Draft, r.Error = "error", fmt.Sprintf("no validated draft (status %d: %s)", resp.StatusCode, bound(string(out), 200))
		return
	}
	r.Draft = draftOutcome(tr.Attempts[0].Issues)
	if resp.StatusCode != http.StatusOK {
		if gjson.GetBytes(out, "error.code").Str != semantic.ErrorCode {
			r.Error = fmt.Sprintf("status %d: %s", resp.StatusCode, bound(gjson.GetBytes(out, "error.message").Str, 200))
		}
		return
	}
	obj, _ := validate.AnswerObject(gjson.GetBytes(out, "choices.0.message.content").Str)
	r.FinalKind = gjson.Get(obj, proposedPath).Str
	final := tr.Attempts[len(tr.Attempts)-1].Issues
	if tr.Final != nil && tr.Final.Attempt >= 0 && tr.Final.Attempt < len(tr.Attempts) {
		final = tr.Attempts[tr.Final.Attempt].Issues
	}
	r.FinalAccepted = accepted(final)
	statusRight := (r.FinalKind == combatKind) == chunk.ActiveCombat && r.FinalKind != ""
	switch r.Proposal {
	case "wrong":
		r.Corrected = r.Draft == "rejected" && statusRight && r.FinalAccepted
		r.Exact = r.Corrected && r.FinalKind == chunk.CorrectKind
	case "correct":
		r.Regressed = r.FinalKind != "" && !statusRight
	}
}

// draftOutcome reads what the validators said of the draft.
func draftOutcome(issues []interceptors.Issue) string {
	out := "approved"
	for _, is := range issues {
		switch {
		case is.Code == semantic.CodeFailed:
			return "failed"
		case is.Code == semantic.CodeRejected:
			out = "rejected"
		case is.Severity == interceptors.Fatal && out == "approved":
			out = "malformed"
		}
	}
	return out
}

// accepted reports an answer without semantic issues and nothing at or above
// Contradiction.
func accepted(issues []interceptors.Issue) bool {
	for _, is := range issues {
		if strings.HasPrefix(is.Code, "semantic.") || is.Severity >= interceptors.Contradiction {
			return false
		}
	}
	return true
}

// summarize computes the figures from the results.
func summarize(rep *evalReport, judgeDurations []time.Duration) {
	var wrong, correct, fa, fr, failed, rejectedWrong, corrected, exact, regressed int
	var added []time.Duration
	for _, r := range rep.Results {
		if r.Error != "" {
			rep.Errors++
		}
		switch r.Proposal {
		case "wrong":
			wrong++
			if r.Draft == "approved" {
				fa++
			}
			if r.Draft == "rejected" {
				rejectedWrong++
			}
			if r.Corrected {
				corrected++
			}
			if r.Exact {
				exact++
			}
		case "correct":
			correct++
			if r.Draft == "rejected" {
				fr++
			}
			if r.Regressed {
				regressed++
			}
		}
		if r.Draft == "failed" {
			failed++
		}
		rep.AddedCalls.Judge += r.JudgeCalls
		rep.AddedCalls.Revision += r.RevisionCalls
		rep.Tokens.Judge = rep.Tokens.Judge.Add(r.JudgeUsage)
		rep.Tokens.Revision = rep.Tokens.Revision.Add(r.RevisionUsage)
		added = append(added, time.Duration(r.AddedMs*float64(time.Millisecond)))
	}
	rep.FalseAcceptance = rate(fa, wrong)
	rep.FalseRejection = rate(fr, correct)
	rep.ExecutionFailures = rate(failed, len(rep.Results))
	rep.Corrections = rate(corrected, rejectedWrong)
	rep.ExactCorrections = exact
	rep.Regressions = rate(regressed, correct)
	rep.AddedCalls.Total = rep.AddedCalls.Judge + rep.AddedCalls.Revision
	if n := len(rep.Results); n > 0 {
		rep.AddedCalls.PerCase = math.Round(float64(rep.AddedCalls.Total)/float64(n)*100) / 100
		rep.Tokens.PerCase = math.Round(float64(rep.Tokens.Judge.TotalTokens+rep.Tokens.Revision.TotalTokens)/float64(n)*10) / 10
	}
	rep.JudgeLatency = latency(judgeDurations)
	rep.AddedLatency = latency(added)
}

// latency is the p50 and p95 of ds (nearest rank), in milliseconds.
func latency(ds []time.Duration) evalLatency {
	l := evalLatency{N: len(ds)}
	if len(ds) == 0 {
		return l
	}
	l.P50, l.P95 = ms(percentile(ds, 50)), ms(percentile(ds, 95))
	return l
}

// percentile returns the p-th percentile of ds by the nearest-rank method: the
// smallest value with at least p% of the values at or below it.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

// writeEvalReport prints the per-case table and the figures.
func writeEvalReport(w io.Writer, rep *evalReport) {
	fmt.Fprintf(w, "factgate eval: %s, %d chunks × 2 proposals = %d cases; route %s, validators %s\n",
		rep.Set, rep.Chunks, rep.Cases, rep.Route, strings.Join(rep.Validators, ", "))
	fmt.Fprintf(w, "judge: %s; producer: %s\n\n", rep.Judge, rep.Producer)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "chunk\tlabel\tcorrect proposal\twrong proposal\t")
	byChunk := map[string][2]evalResult{}
	var order []string
	for _, r := range rep.Results {
		pair, seen := byChunk[r.Chunk]
		if !seen {
			order = append(order, r.Chunk)
		}
		if r.Proposal == "correct" {
			pair[0] = r
		} else {
			pair[1] = r
		}
		byChunk[r.Chunk] = pair
	}
	for _, id := range order {
		pair := byChunk[id]
		label := "no combat"
		if pair[0].ActiveCombat {
			label = "combat"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", id, label, caseCell(pair[0]), caseCell(pair[1]))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	row := func(name string, r evalRate, what string) {
		fmt.Fprintf(tw, "%s\t%d of %d\t%.1f%%\t%s\n", name, r.Count, r.Of, r.Rate*100, what)
	}
	row("false acceptance", rep.FalseAcceptance, "wrong proposals the judge approved")
	row("false rejection", rep.FalseRejection, "correct proposals the judge rejected")
	row("execution failures", rep.ExecutionFailures, "drafts without a valid verdict after the retries")
	row("corrections", rep.Corrections, fmt.Sprintf("rejected wrong proposals revised to the right combat status and accepted (%d with the labelled kind)", rep.ExactCorrections))
	row("regressions", rep.Regressions, "correct proposals whose final answer has the wrong combat status")
	fmt.Fprintf(tw, "added calls\t%d\t%.2f per case\tjudge %d, revision %d\n", rep.AddedCalls.Total, rep.AddedCalls.PerCase, rep.AddedCalls.Judge, rep.AddedCalls.Revision)
	fmt.Fprintf(tw, "judge latency\tp50 %s\tp95 %s\tover %d calls\n", msString(rep.JudgeLatency.P50), msString(rep.JudgeLatency.P95), rep.JudgeLatency.N)
	fmt.Fprintf(tw, "added latency\tp50 %s\tp95 %s\tper case (judge and revision calls)\n", msString(rep.AddedLatency.P50), msString(rep.AddedLatency.P95))
	fmt.Fprintf(tw, "tokens\t%d\t%.1f per case\tjudge %d (prompt %d, completion %d), revision %d (prompt %d, completion %d)\n",
		rep.Tokens.Judge.TotalTokens+rep.Tokens.Revision.TotalTokens, rep.Tokens.PerCase,
		rep.Tokens.Judge.TotalTokens, rep.Tokens.Judge.PromptTokens, rep.Tokens.Judge.CompletionTokens,
		rep.Tokens.Revision.TotalTokens, rep.Tokens.Revision.PromptTokens, rep.Tokens.Revision.CompletionTokens)
	if rep.Errors > 0 {
		fmt.Fprintf(tw, "errors\t%d\t\tcases that could not be evaluated (see the table)\n", rep.Errors)
	}
	_ = tw.Flush()
}

// caseCell renders one case: "narrative: rejected → combat ✓".
func caseCell(r evalResult) string {
	s := r.Proposed + ": " + r.Draft
	if r.FinalKind != "" && r.FinalKind != r.Proposed {
		s += " → " + r.FinalKind
	}
	switch {
	case r.Corrected:
		s += " (corrected)"
	case r.Regressed:
		s += " (regressed)"
	case r.Proposal == "wrong" && r.Draft == "rejected":
		s += " (not corrected)"
	}
	if r.Error != "" {
		s += " [" + bound(r.Error, 60) + "]"
	}
	return s
}

func msString(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2fs", v/1000)
	}
	return fmt.Sprintf("%.0fms", v)
}

// bound cuts s to n bytes at a rune boundary, with an ellipsis.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// evalTraces keeps the evaluation proxy's traces in memory, by id.
type evalTraces struct {
	mu     sync.Mutex
	traces map[string]chan *interceptors.Trace
}

func newEvalTraces() *evalTraces { return &evalTraces{traces: map[string]chan *interceptors.Trace{}} }

func (e *evalTraces) slot(id string) chan *interceptors.Trace {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.traces[id]
	if ch == nil {
		ch = make(chan *interceptors.Trace, 1)
		e.traces[id] = ch
	}
	return ch
}

// SaveTrace implements proxy.TraceStore.
func (e *evalTraces) SaveTrace(_ context.Context, t *interceptors.Trace) error {
	select {
	case e.slot(t.ID) <- t:
	default:
	}
	return nil
}

// LoadTrace implements proxy.TraceStore (the evaluation reads traces with wait).
func (e *evalTraces) LoadTrace(context.Context, string) ([]byte, bool, error) {
	return nil, false, nil
}

// wait returns the trace of id once the proxy saved it.
func (e *evalTraces) wait(ctx context.Context, id string) (*interceptors.Trace, bool) {
	if id == "" {
		return nil, false
	}
	select {
	case t := <-e.slot(id):
		return t, true
	case <-ctx.Done():
		return nil, false
	case <-time.After(10 * time.Second):
		return nil, false
	}
}

// shimTarget is where an upstream's forwarded calls go.
type shimTarget struct {
	base string // with its /v1
	key  string
}

// evalCall is one call the shim forwarded.
type evalCall struct {
	kind     string // judge or revision
	duration time.Duration
	status   int
	usage    interceptors.Usage
}

// evalShim stands between the evaluation's proxy and the providers: it answers the
// producer's first draft of a case with the scripted proposal and forwards every
// other chat completion (judge and revision calls) to the real upstream with its
// key, timing each and reading its usage. The case header stays here.
type evalShim struct {
	producer string
	targets  map[string]shimTarget
	drafts   map[string]string // case id -> draft content
	client   *http.Client

	mu    sync.Mutex
	calls map[string][]evalCall
}

func (sh *evalShim) callsOf(id string) []evalCall {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return slices.Clone(sh.calls[id])
}

func (sh *evalShim) judgeDurations() []time.Duration {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var out []time.Duration
	for _, calls := range sh.calls {
		for _, c := range calls {
			if c.kind == "judge" {
				out = append(out, c.duration)
			}
		}
	}
	return out
}

// maxShimBody bounds a forwarded request or answer.
const maxShimBody = 64 << 20

func (sh *evalShim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/u/")
	name, tail, _ := strings.Cut(rest, "/")
	target, known := sh.targets[name]
	if !ok || !known || tail != "v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"the evaluation forwards chat completions only","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxShimBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := r.Header.Get(evalCaseHeader)
	kind := shimCallKind(body)
	if draft, scripted := sh.drafts[id]; scripted && kind == "draft" && name == sh.producer {
		w.Header().Set("Content-Type", "application/json")
		out, _ := json.Marshal(map[string]any{
			"id": "eval-draft", "object": "chat.completion", "created": time.Now().Unix(), "model": gjson.GetBytes(body, "model").Str,
			"choices": []map[string]any{{"index": 0, "message": map[string]string{"role": "assistant", "content": draft}, "finish_reason": "stop"}},
			"usage":   map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
		})
		_, _ = w.Write(out)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, target.base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if target.key != "" {
		req.Header.Set("Authorization", "Bearer "+target.key)
	}
	start := time.Now()
	resp, err := sh.client.Do(req)
	var out []byte
	status := http.StatusBadGateway
	if err == nil {
		out, err = io.ReadAll(io.LimitReader(resp.Body, maxShimBody))
		resp.Body.Close()
		status = resp.StatusCode
	}
	call := evalCall{kind: kind, duration: time.Since(start), status: status}
	if err != nil {
		out, _ = json.Marshal(map[string]any{"error": map[string]string{"message": "eval forwarding: " + err.Error(), "type": "upstream_error"}})
	} else if gjson.ValidBytes(out) {
		call.usage = interceptors.ParseUsage(out)
	}
	if id != "" && kind != "draft" {
		sh.mu.Lock()
		sh.calls[id] = append(sh.calls[id], call)
		sh.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// shimCallKind tells a chat completion apart: "judge" (strict json_schema output),
// "revision" (an assistant turn) or "draft".
func shimCallKind(body []byte) string {
	if gjson.GetBytes(body, "response_format.type").Str == "json_schema" {
		return "judge"
	}
	for _, m := range gjson.GetBytes(body, "messages").Array() {
		if m.Get("role").Str == "assistant" {
			return "revision"
		}
	}
	return "draft"
}
