package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/factgate/factgate/configs/strictyaml"
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

// chainStages are the stages of a route's chain, in chain order (first =
// outermost), one registration line each; every stage package describes itself
// (its Stage: its config block, what it requires and implies, how it builds) and
// the proxy knows nothing else of it. Adding a stage is its package and one line
// here.
//
//	experiment → context → facts → inject → revise → semantic → validate
//
// Request phases run in this order, response phases in reverse, so a draft is
// validated (validate, then the LLM-backed semantic validators) before the
// hidden revision sees its issues, and the experiment counts the final outcome
// last. Stages are built in reverse (innermost first), so that each sees the
// stages inside it already built (interceptors.BuildContext).
var chainStages = []interceptors.Stage{
	// experiment is outermost: its request phase assigns the variant before any
	// stage reads the overrides, its response phase counts the final outcome.
	abtest.Stage,
	// context resolves the knowledge set, scopes, players and session first:
	// every later stage reads it (reqcontext.FromExchange).
	reqcontext.Stage,
	// facts comes right after context (it reads the session) and starts the
	// index in the background, so it overlaps the upstream call.
	facts.Stage,
	// inject edits the outgoing system prompt once the context is known.
	inject.Stage,
	// revise runs its response phase after semantic and validate: it sees the
	// draft's issues and may replace the answer.
	revise.Stage,
	// semantic registers the LLM-backed validators; validate's response phase
	// runs them after the deterministic ones, and its own response phase (before
	// revise's) fails the request when failure_policy closed says so.
	semantic.Stage,
	// validate stays last: its response phase runs first, so every later
	// response phase (semantic, revise, experiment) sees the draft's issues.
	validate.Stage,
}

// checkStageGraph checks the registered stages once at start-up: each has a
// name no route key takes and a Build, the names are distinct, and Requires and
// Implies name registered stages other than their own.
func checkStageGraph(stages []interceptors.Stage) error {
	known := map[string]bool{}
	var errs []error
	for _, st := range stages {
		switch {
		case st.Name == "":
			errs = append(errs, errors.New("a stage has no name"))
		case known[st.Name]:
			errs = append(errs, fmt.Errorf("stage %s is registered twice", st.Name))
		case slices.Contains(routeKeys, st.Name):
			errs = append(errs, fmt.Errorf("stage %s: %q is a route key, not free for a config block", st.Name, st.Name))
		}
		if st.Build == nil {
			errs = append(errs, fmt.Errorf("stage %s has no Build", st.Name))
		}
		known[st.Name] = true
	}
	for _, st := range stages {
		for _, rel := range []struct {
			what  string
			names []string
		}{{"requires", st.Requires}, {"implies", st.Implies}} {
			for _, n := range rel.names {
				if n == st.Name || !known[n] {
					errs = append(errs, fmt.Errorf("stage %s %s %q, which is not another registered stage (have %s)", st.Name, rel.what, n, strings.Join(stageNames(stages), ", ")))
				}
			}
		}
	}
	return errors.Join(errs...)
}

func stageNames(stages []interceptors.Stage) []string {
	names := make([]string, len(stages))
	for i, st := range stages {
		names[i] = st.Name
	}
	return names
}

// routeStagesOn returns, for the route's blocks, the stages they turn on — each
// with its block, or implied by one (transitively) — mapped to the stages
// implying it; and it checks every key of the route names a stage and every
// stage on has what it requires. Errors name the route, the blocks and the
// line.
func routeStagesOn(file, where string, rc *RouteConfig, stages []interceptors.Stage) (map[string][]string, error) {
	byName := map[string]*interceptors.Stage{}
	for i := range stages {
		byName[stages[i].Name] = &stages[i]
	}
	var errs []error
	keys := slices.Sorted(maps.Keys(rc.Blocks))
	for _, k := range keys {
		if byName[k] == nil {
			n := rc.Blocks[k]
			known := append(slices.Clone(routeKeys), stageNames(stages)...)
			p := strictyaml.Problem{Line: n.Line, Path: where + "." + k, Message: "unknown key (did you mean " + strictyaml.Nearest(k, known) + "?)"}
			if strictyaml.Nearest(k, known) == "" {
				p.Message = fmt.Sprintf("unknown key: a route has %s and the stage blocks %s", strings.Join(routeKeys, ", "), strings.Join(stageNames(stages), ", "))
			}
			errs = append(errs, &strictyaml.Error{File: file, Problems: []strictyaml.Problem{p}})
		}
	}
	if len(errs) > 0 {
		// What the route needs follows from its keys: a mistyped one says it all.
		return nil, errors.Join(errs...)
	}
	on := map[string][]string{}
	var turnOn func(name, by string)
	turnOn = func(name, by string) {
		impliers, seen := on[name]
		if by != "" && !slices.Contains(impliers, by) {
			impliers = append(impliers, by)
		}
		on[name] = impliers
		if !seen {
			for _, imp := range byName[name].Implies {
				turnOn(imp, name)
			}
		}
	}
	for _, st := range stages {
		if rc.HasBlock(st.Name) {
			turnOn(st.Name, "")
		}
	}
	for _, st := range stages {
		impliers, isOn := on[st.Name]
		if !isOn {
			continue
		}
		for _, req := range st.Requires {
			if _, ok := on[req]; ok {
				continue
			}
			if rc.HasBlock(st.Name) {
				errs = append(errs, fmt.Errorf("%s.%s: a %s block needs the route's %s block", where, st.Name, st.Name, req))
			} else {
				errs = append(errs, fmt.Errorf("%s.%s: the %s stage, which the %s block turns on, needs the route's %s block", where, st.Name, st.Name, strings.Join(impliers, " and "), req))
			}
		}
	}
	return on, errors.Join(errs...)
}

// stageBuild is the interceptors.BuildContext of one stage of one route.
type stageBuild struct {
	rc *RouteConfig
	// file and where place the route's blocks for decode errors: the config file
	// and the route's YAML path ("routes[0] (ra3-analyst)").
	file, where string
	name        string
	deps        interceptors.Deps
	implied     []string
	// built are the route's stages built so far (those inside this one), by name.
	built map[string]interceptors.Interceptor
}

func (b *stageBuild) Deps() interceptors.Deps { return b.deps }
func (b *stageBuild) HasBlock() bool          { return b.rc.HasBlock(b.name) }
func (b *stageBuild) ImpliedBy() []string     { return slices.Clone(b.implied) }
func (b *stageBuild) Stage(name string) interceptors.Interceptor {
	return b.built[name]
}

func (b *stageBuild) Decode(v any) error {
	_, err := b.rc.decodeBlockAt(b.file, b.where+"."+b.name, b.name, v)
	return err
}

var _ interceptors.BuildContext = (*stageBuild)(nil)

// buildChains builds every route's chain from its config.
func (s *Server) buildChains() error {
	if err := checkStageGraph(s.stages); err != nil {
		return fmt.Errorf("the registered stages: %w", err)
	}
	for i := range s.cfg.Routes {
		rc := &s.cfg.Routes[i]
		rt := s.routeByName[rc.Name]
		where := fmt.Sprintf("routes[%d] (%s)", i, rc.Name)
		on, err := routeStagesOn(s.cfg.File, where, rc, s.stages)
		if err != nil {
			return err
		}
		deps := s.deps(rc.Name)
		if rc.Pack != "" {
			deps.Pack = s.library.Registry().Pack(rc.Pack)
			if deps.Pack == nil {
				return fmt.Errorf("%s.pack: no pack named %q (have %v)", where, rc.Pack, packNames(s.library.Registry()))
			}
		}
		built := map[string]interceptors.Interceptor{}
		chain := make([]interceptors.Interceptor, len(s.stages))
		for j := len(s.stages) - 1; j >= 0; j-- {
			st := &s.stages[j]
			ic, err := st.Build(&stageBuild{rc: rc, file: s.cfg.File, where: where, name: st.Name, deps: deps, implied: on[st.Name], built: built})
			if err != nil {
				var located *strictyaml.Error
				if errors.As(err, &located) {
					return err // it names the file, the line and the key's whole path
				}
				return fmt.Errorf("%s.%s: %w", where, st.Name, err)
			}
			if ic == nil {
				continue
			}
			if ic.Name() != st.Name {
				return fmt.Errorf("%s.%s: the stage built an interceptor named %q; traces would not name its block", where, st.Name, ic.Name())
			}
			built[st.Name], chain[j] = ic, ic
		}
		chain = slices.DeleteFunc(chain, func(ic interceptors.Interceptor) bool { return ic == nil })
		if rc.ResponseModel == ResponseModelAlias && len(chain) == 0 {
			return fmt.Errorf("%s.response_model: alias needs a route with interceptors (a pack, inject, validate...): a pass-through route relays the upstream's answer unchanged", where)
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

// registerStageEndpoints serves the factgate API endpoints of the stages that
// have some (interceptors.Stage.Endpoints), each given what it built for every
// route, read per request.
func (s *Server) registerStageEndpoints() {
	for _, st := range s.stages {
		if st.Endpoints == nil {
			continue
		}
		built := func() []interceptors.Interceptor {
			var out []interceptors.Interceptor
			for _, rc := range s.cfg.Routes {
				for _, ic := range s.routeByName[rc.Name].chain {
					if ic.Name() == st.Name {
						out = append(out, ic)
					}
				}
			}
			return out
		}
		for _, e := range st.Endpoints(built) {
			s.HandleAPI(e.Path, e.Handler)
		}
	}
}

// cleanupStages calls the Cleanup of every stage of every route's chain that
// has one (interceptors.Cleaner): each waits for its background writes, bounded
// by ctx. It returns the first error.
func (s *Server) cleanupStages(ctx context.Context) error {
	var first error
	for _, rc := range s.cfg.Routes {
		for _, ic := range s.routeByName[rc.Name].chain {
			c, ok := ic.(interceptors.Cleaner)
			if !ok {
				continue
			}
			if err := c.Cleanup(ctx); err != nil && first == nil {
				first = fmt.Errorf("route %s, stage %s: %w", rc.Name, ic.Name(), err)
			}
		}
	}
	return first
}
