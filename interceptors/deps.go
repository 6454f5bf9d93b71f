package interceptors

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/knowledge"
)

// Deps are the shared services an interceptor is built with, once, at start-up.
type Deps struct {
	// Route is the name of the route the interceptor serves.
	Route string
	// Pack is the route's domain pack; nil when the route names none.
	Pack *knowledge.Pack
	// Library holds the knowledge sets (with user overlays) and the render cache.
	Library *knowledge.Library
	// Cache is the proxy's cache (memory, or memory in front of Redis).
	Cache cache.Cache
	// Metrics is where interceptors register their metrics (see Register).
	Metrics prometheus.Registerer
	// Log is the proxy's logger.
	Log *slog.Logger
	// Resolve turns a path from the config into a usable path (relative paths are
	// relative to the config file). Nil means paths are used as they are.
	Resolve func(path string) string
	// Upstreams lists the configured upstream names, so that a config naming an
	// unknown one fails at start-up.
	Upstreams []string
	// MaxJSONDepth bounds the nesting of the upstream answers an interceptor reads
	// (server.max_json_depth); an answer nested deeper is not read. 0 means
	// rawjson.DefaultMaxDepth.
	MaxJSONDepth int
}

// ResolvePath applies d.Resolve when set.
func (d Deps) ResolvePath(p string) string {
	if d.Resolve == nil {
		return p
	}
	return d.Resolve(p)
}

// HasUpstream reports whether an upstream with that name is configured.
func (d Deps) HasUpstream(name string) bool {
	for _, u := range d.Upstreams {
		if u == name {
			return true
		}
	}
	return false
}

// Register registers c on reg and returns it — or, when an identical collector is
// already registered (the same interceptor on another route), the existing one, so
// that every route shares one metric family. A nil reg registers nothing.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
