package facts

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/knowledge"
)

// testStage is a facts stage with its own metrics registry, as one replica of the
// proxy would have it.
type testStage struct {
	*Interceptor
	reg *prometheus.Registry
}

// newStage builds a facts stage over shared (nil: a private memory cache) with
// the test copy of the RA3 fact rules.
func newStage(tb testing.TB, shared cache.Cache, cfg Config) *testStage {
	tb.Helper()
	reg := prometheus.NewRegistry()
	f, err := New(cfg, interceptors.Deps{
		Route:   "ra3",
		Pack:    &knowledge.Pack{Name: "ra3", Facts: loadRules(tb)},
		Cache:   shared,
		Metrics: reg,
	})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return &testStage{Interceptor: f, reg: reg}
}

// chatBody is a chat completion request whose user messages are texts.
func chatBody(tb testing.TB, texts ...string) []byte {
	tb.Helper()
	msgs := []map[string]string{{"role": "system", "content": "You analyse RA3 replays."}}
	for _, t := range texts {
		msgs = append(msgs, map[string]string{"role": "user", "content": t})
	}
	b, err := json.Marshal(map[string]any{"model": "ra3-analyst", "messages": msgs})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// newExchange is an exchange of body, with session in its request context when
// not empty (as the context stage would store it).
func newExchange(body []byte, session string) *interceptors.Exchange {
	ex := &interceptors.Exchange{Route: "ra3", Original: body, Body: body, Trace: interceptors.NewTrace("ra3")}
	if session != "" {
		reqcontext.Store(ex, &reqcontext.Context{Session: session})
	}
	return ex
}

// result is what one request through a stage gave.
type result struct {
	ix    *Index
	info  Info
	err   error
	trace *interceptors.Trace
}

// request runs the stage's request phase for a request with texts as user
// messages and waits for its index, as the validator does.
func (s *testStage) request(tb testing.TB, session string, texts ...string) result {
	tb.Helper()
	return s.requestAs(tb, "", session, texts...)
}

// requestAs is request from a client authenticated with a proxy-issued key.
func (s *testStage) requestAs(tb testing.TB, client, session string, texts ...string) result {
	tb.Helper()
	ex := newExchange(chatBody(tb, texts...), session)
	ex.ClientKey = client
	if err := s.OnRequest(context.Background(), ex); err != nil {
		tb.Fatalf("OnRequest: %v", err)
	}
	ix, info, err := FromExchange(ex)
	return result{ix: ix, info: info, err: err, trace: ex.Trace}
}

// settle waits for the stage's write-backs to the shared cache, as a later
// request on another replica would find them.
func (s *testStage) settle() { s.store.writes.Wait() }

// sources returns factgate_fact_index_total per source for the test route.
func (s *testStage) sources(tb testing.TB) map[string]float64 {
	tb.Helper()
	out := map[string]float64{}
	families, err := s.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "factgate_fact_index_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == "ra3" {
				out[labels["source"]] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// builds returns how many extractions factgate_fact_index_build_seconds observed.
func (s *testStage) builds(tb testing.TB) uint64 {
	tb.Helper()
	var n uint64
	families, err := s.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "factgate_fact_index_build_seconds" {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// hookedCache wraps a cache: beforeGet runs before every Get of a fact index, and
// failing makes every call fail as a broken backend would (without the Tiered
// fallback that normally absorbs such errors).
type hookedCache struct {
	cache.Cache
	beforeGet func(key string)
	failing   atomic.Bool
}

var errBackendDown = errors.New("backend down")

func (c *hookedCache) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if c.beforeGet != nil {
		c.beforeGet(key)
	}
	if c.failing.Load() {
		return nil, false, errBackendDown
	}
	return c.Cache.Get(ctx, key)
}

func (c *hookedCache) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if c.failing.Load() {
		return errBackendDown
	}
	return c.Cache.Set(ctx, key, value, ttl)
}

func (c *hookedCache) SetAdd(ctx context.Context, key, member string, ttl time.Duration) error {
	if c.failing.Load() {
		return errBackendDown
	}
	return c.Cache.SetAdd(ctx, key, member, ttl)
}

func (c *hookedCache) SetMembers(ctx context.Context, key string) ([]string, error) {
	if c.failing.Load() {
		return nil, errBackendDown
	}
	return c.Cache.SetMembers(ctx, key)
}

func newMemoryCache() *cache.Memory { return cache.NewMemory(cache.MemoryConfig{}) }

func sleepBriefly() { time.Sleep(time.Millisecond) }
