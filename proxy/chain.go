package proxy

import (
	"fmt"
	"sort"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/abtest"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/interceptors/inject"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/interceptors/revise"
	"github.com/factgate/factgate/interceptors/semantic"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/knowledge"
)

// RouteInterceptors holds the configuration blocks of a route's interceptors. A
// block that is present turns its interceptor on for the route.
//
// The chain is built once at start-up, in this order (first = outermost):
//
//	experiment → context → facts → inject → revise → semantic → validate
//
// Request phases run in that order; response phases in reverse, so a draft is
// validated (validate, then the LLM-backed semantic validators) before the hidden
// revision sees its issues, and the experiment records the final outcome last.
type RouteInterceptors struct {
	// Pack names the route's domain pack ("ra3", "dnd"). A route with a pack gets
	// its request context resolved (knowledge set, scopes, players, session).
	Pack string `yaml:"pack"`

	// --- interceptor blocks (each owned by its package) ---

	// Experiment is the route's A/B experiment (PRODUCT.md §11): variants with
	// weights and overrides, a control, sticky assignment by subject. Present turns
	// it on; it is the outermost stage.
	Experiment *abtest.Config `yaml:"experiment"`

	// Context sets the route's request-context defaults: knowledge_set and scopes
	// ({maps: [map_mp_2_rao1]}), below the client's X-Factgate-* headers and
	// metadata, above what the pack's rules read from the request. The context
	// stage runs on every route with a pack, with or without this block.
	Context *reqcontext.Config `yaml:"context"`

	// Inject puts the rendered knowledge, the pack's contract (when the route
	// validates) and additional rules into one system message at the front of the
	// request. Present (even empty: `inject: {}`) turns injection on.
	Inject *inject.Config `yaml:"inject"`

	// Facts tunes the fact index of the request's operation log (tiers, session
	// merge, bounds). The facts stage runs on every route whose pack has fact rules
	// and that validates or has this block; absent means the defaults.
	Facts *facts.Config `yaml:"facts"`

	// Revise is the hidden revision (PRODUCT.md §9): threshold, max_revisions,
	// budget, relevant_facts_lines. A route with a validate block gets the revision
	// step even without this block, with the defaults.
	Revise *revise.Config `yaml:"revise"`

	// Validate checks answers against the request's facts and the knowledge set
	// (PRODUCT.md §8). Present (even empty: `validate: {}`) turns validation on.
	Validate *validate.Config `yaml:"validate"`

	// Semantic turns on the pack's LLM-backed validators the block names
	// (PRODUCT.md §10; opt-in, never on by default) with the judge's model profile
	// and failure policy. It needs the validate block: validation runs them after
	// the deterministic validators, and only when those found nothing Fatal.
	Semantic *semantic.Config `yaml:"semantic"`
}

// stage builds one interceptor of a route's chain; it returns nil when the route
// does not use it.
type stage func(rc *RouteConfig, deps interceptors.Deps) (interceptors.Interceptor, error)

// stages are the chain's stages in order (first = outermost). Each interceptor
// package contributes one.
var stages = []struct {
	name  string
	build stage
}{
	// --- stages (in chain order) ---
	// experiment is outermost: its request phase assigns the variant before any
	// stage reads the overrides, its response phase counts the final outcome.
	{"experiment", buildExperiment},
	// context resolves the knowledge set, scopes, players and session first: every
	// later stage reads it (reqcontext.FromExchange).
	{"context", buildContext},
	// facts comes right after context (it reads the session) and starts the
	// index in the background, so it overlaps the upstream call.
	{"facts", buildFacts},
	// inject edits the outgoing system prompt once the context is known.
	{"inject", buildInject},
	// revise runs its response phase after semantic and validate: it sees the
	// draft's issues and may replace the answer.
	{"revise", buildRevise},
	// semantic registers the LLM-backed validators; validate's response phase runs
	// them after the deterministic ones, and its own response phase (before
	// revise's) fails the request when failure_policy closed says so.
	{"semantic", buildSemantic},
	// validate stays last: its response phase runs first, so every later response
	// phase (semantic, revise, experiment) sees the draft's issues.
	{"validate", func(rc *RouteConfig, deps interceptors.Deps) (interceptors.Interceptor, error) {
		if rc.Interceptors.Validate == nil {
			return nil, nil
		}
		return validate.New(*rc.Interceptors.Validate, deps)
	}},
}

// buildFacts builds the facts stage: on for a route whose pack has fact rules and
// that validates or has a facts block. A facts block on a route without fact
// rules is a config error.
func buildFacts(rc *RouteConfig, deps interceptors.Deps) (interceptors.Interceptor, error) {
	cfg := rc.Interceptors.Facts
	hasRules := deps.Pack != nil && deps.Pack.Facts != nil
	switch {
	case cfg == nil && (rc.Interceptors.Validate == nil || !hasRules):
		return nil, nil
	case cfg == nil:
		cfg = &facts.Config{}
	}
	return facts.New(*cfg, deps)
}

// buildChains builds every route's chain from its config.
func (s *Server) buildChains() error {
	for i := range s.cfg.Routes {
		rc := &s.cfg.Routes[i]
		rt := s.routeByName[rc.Name]
		deps := s.deps(rc.Name)
		if rc.Interceptors.Pack != "" {
			deps.Pack = s.library.Registry().Pack(rc.Interceptors.Pack)
			if deps.Pack == nil {
				return fmt.Errorf("routes[%d] (%s).pack: no pack named %q (have %v)", i, rc.Name, rc.Interceptors.Pack, packNames(s.library.Registry()))
			}
		}
		var chain []interceptors.Interceptor
		for _, st := range stages {
			ic, err := st.build(rc, deps)
			if err != nil {
				return fmt.Errorf("routes[%d] (%s).%s: %w", i, rc.Name, st.name, err)
			}
			if ic != nil {
				chain = append(chain, ic)
			}
		}
		if rc.ResponseModel == ResponseModelAlias && len(chain) == 0 {
			return fmt.Errorf("routes[%d] (%s).response_model: alias needs a route with interceptors (a pack, inject, validate...): a pass-through route relays the upstream's answer unchanged", i, rc.Name)
		}
		rt.setChain(chain)
	}
	return nil
}

func (s *Server) deps(route string) interceptors.Deps {
	names := make([]string, 0, len(s.upstreams))
	for n := range s.upstreams {
		names = append(names, n)
	}
	sort.Strings(names)
	return interceptors.Deps{
		Route:        route,
		Library:      s.library,
		Cache:        s.cache,
		Metrics:      s.metrics.reg,
		Log:          s.log,
		Resolve:      s.cfg.Resolve,
		Upstreams:    names,
		MaxJSONDepth: s.cfg.Server.MaxJSONDepth,
	}
}

func packNames(r *knowledge.Registry) []string {
	var out []string
	for _, p := range r.Packs() {
		out = append(out, p.Name)
	}
	return out
}

// newLibrary loads the built-in and user packs and watches the overlays.
func (s *Server) newLibrary() (*knowledge.Library, error) {
	reg, err := knowledge.LoadRegistry(s.cfg.Resolve(s.cfg.Knowledge.PacksDir))
	if err != nil {
		return nil, fmt.Errorf("knowledge: %w", err)
	}
	overlays := map[string]string{}
	for set, path := range s.cfg.Knowledge.Overlays {
		overlays[set] = s.cfg.Resolve(path)
	}
	lib, err := knowledge.NewLibrary(reg, knowledge.LibraryOptions{Overlays: overlays, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("knowledge.overlays: %w", err)
	}
	return lib, nil
}

// buildRevise builds the revision step: on for a route with a revise or a validate
// block (a validating route revises with the defaults). The claims block is
// stripped per the validate block's strip_claims, judged by whether inject put the
// contract into the request.
func buildRevise(rc *RouteConfig, deps interceptors.Deps) (interceptors.Interceptor, error) {
	v := rc.Interceptors.Validate
	if rc.Interceptors.Revise == nil && v == nil {
		return nil, nil
	}
	opts := revise.Options{ContractInjected: inject.ContractInjected}
	if v != nil {
		opts.Strip = revise.StripMode(v.StripClaims)
	}
	return revise.New(rc.Interceptors.Revise, deps, opts)
}

// buildContext builds the context stage: on for every route with a pack. A context
// block on a route without a pack is a config error.
func buildContext(rc *RouteConfig, deps interceptors.Deps) (interceptors.Interceptor, error) {
	if deps.Pack == nil {
		if rc.Interceptors.Context != nil {
			return nil, fmt.Errorf("a context block needs the route's pack (set pack)")
		}
		return nil, nil
	}
	return reqcontext.New(rc.Interceptors.Context, deps)
}

// buildInject builds the inject stage: on for a route with an inject block. The
// contract's auto mode follows whether the route validates (has a validate block
// that is not switched off with enabled: false).
func buildInject(rc *RouteConfig, deps interceptors.Deps) (interceptors.Interceptor, error) {
	if rc.Interceptors.Inject == nil {
		return nil, nil
	}
	cfg := *rc.Interceptors.Inject
	v := rc.Interceptors.Validate
	cfg.RouteValidates = v != nil && v.Settings().Enabled
	cfg.RouteHasValidator = v != nil
	return inject.New(&cfg, deps)
}

// buildExperiment builds the experiment stage: on for a route with an experiment
// block. It is told which stages the route has, so that a variant override no
// stage would honour fails at start-up.
func buildExperiment(rc *RouteConfig, deps interceptors.Deps) (interceptors.Interceptor, error) {
	if rc.Interceptors.Experiment == nil {
		return nil, nil
	}
	ri := rc.Interceptors
	return abtest.New(*ri.Experiment, deps, abtest.Stages{
		Inject:   ri.Inject != nil,
		Validate: ri.Validate != nil,
		Revise:   ri.Validate != nil || ri.Revise != nil,
	})
}

// experiments returns the experiments of every route's chain, in config order,
// for GET /factgate/v1/experiments.
func (s *Server) experiments() []*abtest.Experiment {
	var out []*abtest.Experiment
	for _, rc := range s.cfg.Routes {
		for _, ic := range s.routeByName[rc.Name].chain {
			if e, ok := ic.(*abtest.Experiment); ok {
				out = append(out, e)
			}
		}
	}
	return out
}

// buildSemantic builds the semantic stage: on for a route with a semantic block,
// which needs the validate block (validation runs the validators).
func buildSemantic(rc *RouteConfig, deps interceptors.Deps) (interceptors.Interceptor, error) {
	cfg := rc.Interceptors.Semantic
	if cfg == nil {
		return nil, nil
	}
	v := rc.Interceptors.Validate
	if v == nil {
		return nil, fmt.Errorf("a semantic block needs the route's validate block: validation runs the semantic validators after the deterministic ones")
	}
	c := *cfg
	c.RouteValidates = v.Settings().Enabled
	return semantic.New(c, deps)
}
