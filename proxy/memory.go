package proxy

import (
	"os"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
)

// RuntimeAllowance is the Go memory a proxy may use beside its configured budgets:
// the runtime, goroutine stacks, connection buffers, requests in flight, the
// fact-key memos, the knowledge sets, and the garbage collector's headroom. The
// process's RSS adds the program's own resident pages (about 16 MB), so it stays
// within the budgets + 48 MB.
const RuntimeAllowance units.ByteSize = 28 << 20

// RSSAllowance is what a proxy's RSS may exceed the sum of its budgets by under
// sustained load: RuntimeAllowance plus the program's resident pages.
const RSSAllowance = 48_000_000

// MemoryBudget is what the configured memory bounds add up to. Every byte the
// proxy keeps between requests is charged to one of them.
type MemoryBudget struct {
	// Facts is the sum of the stages' memory bounds over the routes
	// (interceptors.MemoryBudgeter): facts.memory_bytes of every route with a
	// facts stage, each with its own tier of decoded fact indexes and session
	// records.
	Facts units.ByteSize
	// Cache is cache.memory.max_bytes: encoded fact indexes, session sets, A/B
	// counters, and values read from Redis.
	Cache units.ByteSize
	// Traces is traces.memory_bytes.
	Traces units.ByteSize
	// Pending is cache.tiered.max_pending_bytes when a redis block is present: the
	// writes kept for Redis while it fails.
	Pending units.ByteSize
}

// Budgets returns the sum of the configured budgets.
func (b MemoryBudget) Budgets() units.ByteSize { return b.Facts + b.Cache + b.Traces + b.Pending }

// Limit returns the budgets plus RuntimeAllowance: the memory the process should
// stay within, and the Go runtime's soft memory limit that serve sets.
func (b MemoryBudget) Limit() units.ByteSize { return b.Budgets() + RuntimeAllowance }

// MemoryBudget returns the server's memory budget, from its configuration and the
// routes it built.
func (s *Server) MemoryBudget() MemoryBudget {
	b := MemoryBudget{
		Cache:  s.cfg.Cache.Memory.Budget(),
		Traces: s.cfg.Traces.MemoryBytes,
	}
	if s.cfg.Cache.Redis != nil {
		b.Pending = s.cfg.Cache.Tiered.PendingBudget()
	}
	for _, rt := range s.routeByName {
		for _, ic := range rt.chain {
			if m, ok := ic.(interceptors.MemoryBudgeter); ok {
				b.Facts += units.ByteSize(m.MemoryBudget())
			}
		}
	}
	return b
}

// registerMemoryBudget exports the budget as factgate_memory_budget_bytes{part}.
func (s *Server) registerMemoryBudget() {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "factgate_memory_budget_bytes",
		Help: "The configured memory budgets by part (facts, cache, traces, pending) and the runtime allowance beside them (runtime); their sum is the process's memory limit.",
	}, []string{"part"})
	if err := s.metrics.reg.Register(g); err != nil {
		return // registered already (a second server on one registry)
	}
	b := s.MemoryBudget()
	for part, v := range map[string]units.ByteSize{"facts": b.Facts, "cache": b.Cache, "traces": b.Traces, "pending": b.Pending, "runtime": RuntimeAllowance} {
		g.WithLabelValues(part).Set(float64(v))
	}
}

// ApplyMemoryLimit sets the Go runtime's soft memory limit to the server's
// MemoryBudget().Limit(), so that the garbage collector keeps the heap within the
// configured budgets instead of letting it grow to twice what is live (GOGC=100).
// A GOMEMLIMIT in the environment wins. It returns the limit in effect (-1 when
// GOMEMLIMIT set none) and whether it came from the budget. The process-wide
// setting is the caller's choice: factgate serve applies it, tests do not.
func ApplyMemoryLimit(s *Server) (limit int64, fromBudget bool) {
	if os.Getenv("GOMEMLIMIT") != "" {
		limit = debug.SetMemoryLimit(-1)
		s.log.Info("memory limit from GOMEMLIMIT", "limit_bytes", limit, "budgets", s.MemoryBudget().Budgets().String())
		return limit, false
	}
	b := s.MemoryBudget()
	limit = int64(b.Limit())
	debug.SetMemoryLimit(limit)
	s.log.Info("memory limit set from the configured budgets", "limit", b.Limit().String(),
		"facts", b.Facts.String(), "cache", b.Cache.String(), "traces", b.Traces.String(), "pending", b.Pending.String(), "runtime", RuntimeAllowance.String())
	return limit, true
}
