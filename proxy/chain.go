package proxy

import (
	"fmt"
	"sort"

	"github.com/factgate/factgate/interceptors"
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
		Route:     route,
		Library:   s.library,
		Cache:     s.cache,
		Metrics:   s.metrics.reg,
		Log:       s.log,
		Resolve:   s.cfg.Resolve,
		Upstreams: names,
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
