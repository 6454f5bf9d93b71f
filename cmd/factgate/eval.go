package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/semantic"
	"github.com/factgate/factgate/interceptors/semantic/eval"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/proxy"
)

func init() {
	register("eval", "evaluate a route's semantic validators on a labelled set (false acceptance and rejection, corrections, calls, latency, tokens)", runEval)
}

// evalModel is the model name the evaluation's requests use when the route
// rewrites it (upstream_model); a route that forwards the client's model gets its
// first model alias instead, which is then the provider's model name.
const evalModel = "factgate-eval"

// Exit statuses of factgate eval.
const (
	evalDone       = 0 // the figures were computed for every case
	evalIncomplete = 1 // some case could not be evaluated (it is listed with its error)
	evalUsage      = 2 // bad flags, an unreadable set or config
)

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("factgate eval", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprint(stderr, `Usage: factgate eval --config FILE --route NAME [--set DIR] [--json] [--concurrency N]
       factgate eval --base-url URL --model M [--key-env NAME] [--pack NAME] [--validators A,B] [--set DIR] [--json]

Runs a labelled set through a route's semantic validators before they are turned
on for all traffic. Each chunk is sent twice through the route, in process — the
real chain: inject, the deterministic validators, the judge, the hidden revision —
once with the chunk's labelled value as the producer's first draft and once with
a wrong one, of the other label (the pack's evaluation block says which: for the
D&D pack, "narrative" for a combat chunk, "combat" otherwise). The first draft is
scripted; the judge calls and the revision calls go to the configured upstreams
(a provider: this costs tokens).

Figures:
  false acceptance    wrong proposals the judge approved (of the wrong proposals)
  false rejection     correct proposals the judge rejected (of the correct proposals)
  execution failures  drafts the judge gave no valid verdict for after its retries
  corrections         rejected wrong proposals whose revision reached the chunk's
                      label and was accepted by the validators
  regressions         correct proposals whose final answer has the other label
  added calls         judge and revision calls (the draft is not counted)
  latency             judge calls p50/p95; added time per case p50/p95
  tokens              judge and revision tokens

With --config the route's upstreams, semantic profile and revision settings are
used (its experiment, auth and cache are not); provider keys come from each
upstream's api_key_env. With --base-url one provider serves the producer and the
judge, keyed by $FACTGATE_EVAL_API_KEY (--key-env, a FACTGATE_* variable); the
judge must support strict structured output (response_format json_schema).
Without --set the pack's own labelled set runs (the D&D pack's: 14 chunks). Exit
status: 0 done, 1 some case could not be evaluated, 2 usage.

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
	keyEnv := flags.String("key-env", "FACTGATE_EVAL_API_KEY", "FACTGATE_* environment variable with the provider key (with --base-url)")
	packName := flags.String("pack", "dnd", "the pack whose validators run (with --base-url)")
	validators := flags.String("validators", "", "comma-separated semantic validators of the pack (with --base-url; default: all)")
	setDir := flags.String("set", "", "folder of labelled chunk files (*.json); default: the pack's own set")
	asJSON := flags.Bool("json", false, "print the report as JSON")
	concurrency := flags.Int("concurrency", 1, fmt.Sprintf("cases run at once (1 to %d)", eval.MaxConcurrency))
	timeout := flags.Duration("timeout", eval.DefaultTimeout, "bound on one case (the draft's validation and its revisions)")
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
	case *baseURL != "" && !strings.HasPrefix(*keyEnv, "FACTGATE_"):
		return fail("--key-env %s: provider keys come from FACTGATE_* environment variables", *keyEnv)
	case *concurrency < 1 || *concurrency > eval.MaxConcurrency:
		return fail("--concurrency %d: want 1 to %d", *concurrency, eval.MaxConcurrency)
	case *timeout <= 0:
		return fail("--timeout %s: want a positive duration", *timeout)
	}

	var (
		cfg   *proxy.Config
		route string
		err   error
	)
	if *configFile != "" {
		if cfg, err = proxy.LoadConfig(*configFile); err != nil {
			return fail("%v", err)
		}
		route = *routeName
	} else {
		if cfg, err = baseURLConfig(*baseURL, *model, *keyEnv, *packName, splitList(*validators)); err != nil {
			return fail("%v", err)
		}
		route = "eval"
	}
	rc, sem, err := evalRoute(cfg, route)
	if err != nil {
		return fail("%v", err)
	}
	for name, u := range cfg.Upstreams {
		for _, k := range u.KeyEnvs() {
			switch {
			case os.Getenv(k.Env) != "":
			case *baseURL != "":
				fmt.Fprintf(stderr, "factgate eval: warning: $%s is not set; the provider calls go without a key\n", k.Env)
			default:
				fmt.Fprintf(stderr, "factgate eval: warning: $%s (upstreams.%s) is not set; its calls go without it\n", k.Env, name)
			}
		}
	}
	reg, err := knowledge.LoadRegistry(cfg.Resolve(cfg.Knowledge.PacksDir))
	if err != nil {
		return fail("knowledge: %v", err)
	}
	pack := reg.Pack(rc.Pack)
	if pack == nil {
		return fail("route %s: no pack %q", rc.Name, rc.Pack)
	}
	spec, err := eval.Spec(pack, sem.Validators[0])
	if err != nil {
		return fail("route %s: %v", rc.Name, err)
	}
	var enum []string
	if pack.Answer != nil {
		enum = pack.Answer.Enums[spec.Proposed]
	}
	fsys, setName := spec.Evaluation.SetFS, fmt.Sprintf("pack %s's set %s", pack.Name, spec.Evaluation.Set)
	if *setDir != "" {
		fsys, setName = os.DirFS(*setDir), *setDir
	}
	if fsys == nil {
		return fail("pack %s ships no labelled set for validator %s: name one with --set", pack.Name, spec.Name)
	}
	chunks, err := eval.LoadSet(fsys, spec.Evaluation, enum)
	if err != nil {
		return fail("--set %s: %v", setName, err)
	}
	clientModel := evalModel
	if first := rc.UpstreamList(); len(first) == 0 || first[0].UpstreamModel == "" {
		if len(rc.Models) == 0 {
			return fail("route %s has neither upstream_model nor models: the evaluation cannot tell which model the producer is", rc.Name)
		}
		clientModel = rc.Models[0]
	}
	rep, err := eval.Run(ctx, eval.Options{
		Pack: pack, Validators: sem.Validators, Route: rc.Name, Model: clientModel,
		Judge: describeProfile(rc, sem.Settings()), Producer: describeProfile(rc, semantic.Settings{}),
		Chunks: chunks, Set: setName, Concurrency: *concurrency, Timeout: *timeout,
		Start: evalProxy(cfg, rc, clientModel),
	})
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
// everywhere; the provider's key comes from keyEnv, as any upstream's does.
func baseURLConfig(base, model, keyEnv, pack string, validators []string) (*proxy.Config, error) {
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
		"upstreams": map[string]any{"provider": map[string]any{"base_url": base, "api_key_env": keyEnv}},
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

// evalRoute returns the route named name, which must have semantic validators to
// evaluate and the validate block that runs them, with its semantic block.
func evalRoute(cfg *proxy.Config, name string) (*proxy.RouteConfig, semantic.Config, error) {
	var names []string
	for i := range cfg.Routes {
		rc := &cfg.Routes[i]
		names = append(names, rc.Name)
		if rc.Name != name {
			continue
		}
		var sem semantic.Config
		has, err := rc.DecodeBlock("semantic", &sem)
		switch {
		case err != nil:
			return nil, sem, fmt.Errorf("route %s: semantic: %w", rc.Name, err)
		case !has || len(sem.Validators) == 0:
			return nil, sem, fmt.Errorf("route %s has no semantic block: nothing to evaluate", rc.Name)
		case !rc.HasBlock("validate"):
			return nil, sem, fmt.Errorf("route %s has no validate block: its semantic validators never run", rc.Name)
		}
		return rc, sem, nil
	}
	return nil, semantic.Config{}, fmt.Errorf("--route: no route named %q in %s (have %s)", name, cfg.File, strings.Join(names, ", "))
}

// evalProxy returns how eval.Run starts its proxy: the real one, serving the route
// alone on loopback — its upstreams, keys, judge profile and revision as
// configured; no experiment, no client auth (the proxy injects each upstream's
// own key), no Redis — with the engine's stage innermost.
func evalProxy(cfg *proxy.Config, rc *proxy.RouteConfig, model string) func(interceptors.Interceptor) (eval.Proxy, error) {
	return func(stage interceptors.Interceptor) (eval.Proxy, error) {
		ecfg := *cfg
		erc := *rc
		erc.Models, erc.Default = []string{model}, false
		erc.Blocks = maps.Clone(rc.Blocks)
		delete(erc.Blocks, "experiment")
		ecfg.Routes = []proxy.RouteConfig{erc}
		ecfg.Auth = proxy.AuthConfig{Mode: "passthrough"}
		ecfg.Cache.Redis = nil
		ecfg.Server.MetricsListen = ""
		ecfg.Server.DrainGrace = nil // no load balancer watches this in-process proxy
		if err := ecfg.Validate(); err != nil {
			return nil, err
		}
		srv, err := proxy.New(&ecfg, proxy.WithLogger(slog.New(slog.DiscardHandler)), proxy.WithInnermostStage(erc.Name, stage))
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		go func() { _ = srv.Serve(ln) }()
		return evalServer{srv: srv, url: "http://" + ln.Addr().String()}, nil
	}
}

// evalServer is the evaluation's proxy as eval.Proxy.
type evalServer struct {
	srv *proxy.Server
	url string
}

func (e evalServer) URL() string { return e.url }

func (e evalServer) LoadTrace(ctx context.Context, id string) ([]byte, bool, error) {
	return e.srv.Traces().LoadTrace(ctx, id)
}

func (e evalServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return e.srv.Shutdown(ctx)
}

// describeProfile names a model on an upstream ("gpt-4o-mini on upstream openai").
func describeProfile(rc *proxy.RouteConfig, s semantic.Settings) string {
	model, up := s.Model, s.Upstream
	var first proxy.RouteUpstream
	if list := rc.UpstreamList(); len(list) > 0 {
		first = list[0]
	}
	if model == "" {
		model = first.UpstreamModel
	}
	if model == "" && len(rc.Models) > 0 {
		model = rc.Models[0]
	}
	if up == "" {
		up = first.Name
	}
	return model + " on upstream " + up
}

// writeEvalReport prints the per-case table and the figures.
func writeEvalReport(w io.Writer, rep *eval.Report) {
	fmt.Fprintf(w, "factgate eval: %s, %d chunks × 2 proposals = %d cases; route %s, validators %s\n",
		rep.Set, rep.Chunks, rep.Cases, rep.Route, strings.Join(rep.Validators, ", "))
	fmt.Fprintf(w, "judge: %s; producer: %s\n\n", rep.Judge, rep.Producer)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "chunk\tlabel\tcorrect proposal\twrong proposal\t")
	byChunk := map[string][2]eval.Result{}
	var order []string
	for _, r := range rep.Results {
		pair, seen := byChunk[r.Chunk]
		if !seen {
			order = append(order, r.Chunk)
		}
		if r.Proposal == eval.ProposalCorrect {
			pair[0] = r
		} else {
			pair[1] = r
		}
		byChunk[r.Chunk] = pair
	}
	for _, id := range order {
		pair := byChunk[id]
		label := "no " + rep.LabelName
		if pair[0].Label {
			label = rep.LabelName
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", id, label, caseCell(pair[0]), caseCell(pair[1]))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	row := func(name string, r eval.Rate, what string) {
		fmt.Fprintf(tw, "%s\t%d of %d\t%.1f%%\t%s\n", name, r.Count, r.Of, r.Rate*100, what)
	}
	row("false acceptance", rep.FalseAcceptance, "wrong proposals the judge approved")
	row("false rejection", rep.FalseRejection, "correct proposals the judge rejected")
	row("execution failures", rep.ExecutionFailures, "drafts without a valid verdict after the retries")
	row("corrections", rep.Corrections, fmt.Sprintf("rejected wrong proposals revised to the right %s status and accepted (%d with the labelled %s)", rep.LabelName, rep.ExactCorrections, rep.ProposedField))
	row("regressions", rep.Regressions, fmt.Sprintf("correct proposals whose final answer has the wrong %s status", rep.LabelName))
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

// caseCell renders one case: "narrative: rejected → combat (corrected)".
func caseCell(r eval.Result) string {
	s := r.Proposed + ": " + r.Draft
	if r.FinalValue != "" && r.FinalValue != r.Proposed {
		s += " → " + r.FinalValue
	}
	switch {
	case r.Corrected:
		s += " (corrected)"
	case r.Regressed:
		s += " (regressed)"
	case r.Proposal == eval.ProposalWrong && r.Draft == eval.DraftRejected:
		s += " (not corrected)"
	}
	if e := r.Error; e != "" {
		if utf8.RuneCountInString(e) > 60 {
			e = fmt.Sprintf("%.59s…", e) // precision counts runes: never cuts one
		}
		s += " [" + e + "]"
	}
	return s
}

func msString(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2fs", v/1000)
	}
	return fmt.Sprintf("%.0fms", v)
}
