package interceptors

import (
	"context"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/knowledge"
)

// Stage describes one stage of a route's chain, the way a Caddy module declares
// itself: each stage package exports one (`var Stage = interceptors.Stage{...}` in
// its stage.go) and owns the route's config block of that name. The proxy
// registers the stages in chain order in one place (proxy/chain.go), checks the
// graph their Requires and Implies draw once at start-up, and builds every
// route's chain from them.
type Stage struct {
	// Name is the stage's config block key on a route ("validate") and its name
	// in traces, logs and metrics.
	Name string
	// Requires names the stages a route must have when it has this stage's block
	// (its own block, or one that implies it): a route without them is a config
	// error naming both blocks.
	Requires []string
	// Implies names the stages this stage's block turns on with their defaults
	// when the route has no block of theirs: validate implies facts and revise.
	// An implied stage still decides in Build whether it applies to the route
	// (facts does not on a pack without fact rules).
	Implies []string
	// Build builds the stage for one route, once, at start-up. It is called for
	// every route, with or without the stage's block; a nil Interceptor with a
	// nil error means the stage is off for the route. An error is a config
	// error: the proxy prefixes it with the file, the route and the block.
	//
	// A built stage that works in the background after a request's answer
	// implements Cleaner; one that keeps memory between requests under a bound,
	// MemoryBudgeter; one that renders a prompt the console can preview,
	// PromptPreviewer.
	Build func(b BuildContext) (Interceptor, error)
	// Endpoints, when set, returns the factgate API endpoints that serve the
	// stage's data (the experiments report), the way a Caddy module registers
	// its admin routes: the proxy calls it once at start-up and serves them with
	// its API's auth. built returns, when called (per request), what the stage
	// built for each route in config order, routes where it is off left out.
	Endpoints func(built func() []Interceptor) []Endpoint
}

// Endpoint is a path of the factgate API a stage serves.
type Endpoint struct {
	// Path is under /factgate/; one ending in "/" serves every path below it.
	Path string
	// Handler answers; its errors use the OpenAI error envelope (Error).
	Handler fasthttp.RequestHandler
}

// BuildContext is what a stage is built from: its own config block, the route's
// shared services and a read-only view of the route's other stages.
//
// Stages are built innermost first (validate before semantic before revise ...
// before experiment), so that a stage sees the stages inside it already built
// and reads what they export (ValidationPolicy) through StageView. What flows
// the other way, from an outer stage's request phase to an inner stage, travels
// on the Exchange at request time (Exchange.ContractInjected, Overrides).
type BuildContext interface {
	StageView
	// Deps are the route's shared services: its pack, the knowledge library,
	// the cache, the metrics registry, the logger.
	Deps() Deps
	// HasBlock reports whether the route has the stage's own config block. A
	// block written as null ("inject:" with nothing after it) is no block.
	HasBlock() bool
	// ImpliedBy names the stages on the route whose blocks turn this stage on
	// (Stage.Implies); nil when none does.
	ImpliedBy() []string
	// Decode decodes the stage's own block into v, a pointer to the stage's
	// config type, strictly: a key that names no field of v's type is an error
	// naming the key and its line. Without a block it leaves v as it is and
	// returns nil, so that v's zero value (or what the caller set) is the
	// default.
	Decode(v any) error
}

// StageView is a read-only view of the stages of one route's chain.
type StageView interface {
	// Stage returns the named stage as built for the route; nil when it is off
	// for the route, or is not built yet (it is outside the asking stage in the
	// chain). A stage exports settings to the stages outside it by implementing
	// a small interface of this package (ValidationPolicy) on what it built.
	Stage(name string) Interceptor
}

// ValidationPolicy is what the validate stage exports to the stages outside it:
// inject composes the contract by it (contract: auto), revise strips the claims
// block by it, semantic registers its validators by it.
type ValidationPolicy interface {
	// Validates reports whether the route validates answers when no A/B variant
	// says otherwise (validate.enabled).
	Validates() bool
	// StripClaims is the route's strip_claims mode: "auto", "always" or "never".
	StripClaims() string
}

// Cleaner is implemented by a built stage whose work outlives a request's
// answer: writes to the cache in the background (A/B counters, fact indexes).
// The proxy's Shutdown calls Cleanup for every route's chain once the last
// request has been answered and before the cache closes; Cleanup waits for the
// stage's background work to end and returns nil, or returns ctx's error when
// ctx (bounded by server.shutdown_timeout) ends first. It may be called more
// than once (a stage shared by several chains) and must be safe to.
type Cleaner interface {
	Cleanup(ctx context.Context) error
}

// MemoryBudgeter is implemented by a built stage that keeps memory between
// requests under a configured bound (the facts stage's memory_bytes: decoded
// fact indexes and session records). The proxy adds every route's to its
// memory budget (factgate_memory_budget_bytes{part="facts"}) and to the Go
// runtime's soft memory limit.
type MemoryBudgeter interface {
	// MemoryBudget returns the bound in bytes.
	MemoryBudget() int64
}

// PromptPreviewer is implemented by a built stage that renders the system prompt
// sent upstream (inject): the console shows the prompt for a knowledge set and
// scopes with it. set may be nil when the route or the overrides use a custom
// prompt.
type PromptPreviewer interface {
	Preview(set *knowledge.Set, scopes knowledge.Scopes, ov Overrides) string
}
