package facts

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/reqcontext"
)

// ErrNoFacts is what FromExchange reports for an exchange whose chain has no facts
// stage (the route's pack has no fact rules, or the route neither validates nor
// has a facts block). The nil index it returns with it is an empty index.
var ErrNoFacts = errors.New("facts: the route has no facts stage")

// Interceptor is the facts stage of a route's chain: its request phase starts
// resolving the fact index of the request's user text in the background, so the
// work overlaps the upstream call, and FromExchange waits for it.
//
// The index is resolved through three tiers, with single flight so that
// concurrent requests for one log resolve it once: the in-process LRU of decoded
// indexes, the shared cache (Redis when configured; "facts:" + the fact key), and
// extraction with the pack's fact rules, written back to both. With a session id
// (the request context's Session), the request's fact key joins the session's set
// in the shared cache and the indexes of every segment in the set are merged.
//
// Fail-open: no error fails the request. When the index cannot be resolved, the
// exchange gets an empty index (validators that need facts stay silent), and the
// trace says why. It is safe for concurrent use.
type Interceptor struct {
	route       string
	store       *store
	sessionTTL  time.Duration
	maxSegments int
	maxBytes    int
	memoryBytes int64
	sources     map[string]prometheus.Counter
	// memory reports the memory tier's bytes and entries after each request.
	memory, entries prometheus.Gauge
	// jobs tracks the requests' resolving jobs still running: they outlive a
	// request whose answer is not validated, and write to the shared cache.
	jobs sync.WaitGroup
}

// New builds the facts stage of the route deps.Route from cfg: it compiles the
// route pack's fact rules (deps.Pack.Facts) with cfg's bounds and registers the
// metrics on deps.Metrics. deps.Cache is the shared tier; nil gives the stage a
// private in-memory cache (sessions then live in this process only). The error
// names the problem: a bad config value, a route without a pack or a pack without
// fact rules, rules that do not compile.
func New(cfg Config, deps interceptors.Deps) (*Interceptor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Pack == nil {
		return nil, errors.New("the route names no pack, so there are no fact rules to extract facts with")
	}
	if deps.Pack.Facts == nil {
		return nil, fmt.Errorf("pack %q has no fact rules (facts: in its pack.yaml)", deps.Pack.Name)
	}
	st := cfg.settings()
	x, err := NewExtractor(deps.Pack.Facts, WithMaxBytes(st.maxBytes))
	if err != nil {
		return nil, fmt.Errorf("pack %q: %w", deps.Pack.Name, err)
	}
	// The extraction bound changes what an index holds, so a non-default bound is
	// part of the key: replicas configured differently never share an index.
	keyVersion := x.Version()
	if st.maxBytes != DefaultMaxBytes {
		keyVersion += "\x00max_bytes=" + strconv.Itoa(st.maxBytes)
	}
	shared := deps.Cache
	if shared == nil {
		shared = cache.NewMemory(cache.MemoryConfig{})
	}
	m := newMetrics(deps.Metrics)
	f := &Interceptor{
		route:       deps.Route,
		sessionTTL:  st.sessionTTL,
		maxSegments: st.maxSegments,
		maxBytes:    st.maxBytes,
		memoryBytes: st.memoryBytes,
		sources:     map[string]prometheus.Counter{},
		memory:      m.memory.WithLabelValues(deps.Route),
		entries:     m.entries.WithLabelValues(deps.Route),
	}
	for _, src := range []string{SourceMemory, SourceShared, SourceBuilt} {
		f.sources[src] = m.indexes.WithLabelValues(deps.Route, src)
	}
	f.store = newStore(x, keyVersion, shared, st, func(d time.Duration) { m.builds.Observe(d.Seconds()) }, deps.Log)
	f.store.observeEncoded = func(n int) { m.encoded.Observe(float64(n)) }
	return f, nil
}

// Name implements interceptors.Interceptor.
func (f *Interceptor) Name() string { return "facts" }

// MemoryBudget returns the bytes the stage's memory tier may hold (memory_bytes):
// decoded fact indexes, merged session indexes and session records.
func (f *Interceptor) MemoryBudget() int64 { return f.memoryBytes }

// Info describes how a request's fact index was resolved.
type Info struct {
	// Key is the fact key of the request's own user text ("" when the request has
	// no user text): the shared cache holds its index under "facts:" + Key.
	Key string `json:"key,omitempty"`
	// Source is where the request's own index came from: SourceMemory,
	// SourceShared or SourceBuilt; "" when there was no text or it failed.
	Source string `json:"source,omitempty"`
	// BuildTime is the extraction's duration when Source is SourceBuilt.
	BuildTime time.Duration `json:"build_time,omitempty"`
	// Session is the request's session id ("" = none).
	Session string `json:"session,omitempty"`
	// Segments counts the session segments merged into the index, the request's
	// own included; 0 without a session.
	Segments int `json:"segments,omitempty"`
	// MissingSegments counts session segments whose index no tier holds any more
	// (expired or evicted everywhere); they were left out.
	MissingSegments int `json:"missing_segments,omitempty"`
	// SessionUnconfirmed reports that the session's list of segments could not be
	// read from the shared cache (Redis failing): the segments this replica knows
	// were merged, but others' may be missing, so the facts may be partial.
	SessionUnconfirmed bool `json:"session_unconfirmed,omitempty"`
	// DroppedSegments counts session segments left out by max_session_segments.
	DroppedSegments int `json:"dropped_segments,omitempty"`
	// Truncated reports that the text (or a merged segment's) exceeded the
	// extraction bound; lines past it were ignored.
	Truncated bool `json:"truncated,omitempty"`
	// Duration is how long resolving took, from the request phase to the result.
	Duration time.Duration `json:"duration,omitempty"`
}

// pending is a request's fact index being resolved in the background. The job
// ends with finished set and done released; a WaitGroup and a flag, not a
// channel, as a channel was one more allocation per request.
type pending struct {
	done     sync.WaitGroup
	finished atomic.Bool
	ix       *Index
	info     Info
	err      error
	trace    *interceptors.Trace
	wait     sync.Once
}

type pendingKey struct{}

// OnRequest implements interceptors.RequestPhase: it starts resolving the fact
// index and returns at once. It never fails.
func (f *Interceptor) OnRequest(ctx context.Context, ex *interceptors.Exchange) error {
	var session string
	if c, ok := reqcontext.FromExchange(ex); ok {
		session = c.Session
	}
	if session != "" && ex.ClientKey != "" {
		// With proxy-issued keys, sessions are per client: another client naming
		// the same session id must not have this client's log merged into its
		// facts (or quoted back in its revision requests). The NUL cannot occur in
		// a client name or a header value, so no two pairs share a key.
		session = ex.ClientKey + "\x00" + session
	}
	p := &pending{trace: ex.Trace}
	p.done.Add(1)
	ex.SetValue(pendingKey{}, p)
	// The job reads only what the exchange will never change (the client's body as
	// received) and writes only to the trace, which is safe for concurrent use.
	// The body may be in one of the exchange's pooled buffers: the job holds them
	// until it has read the body, which may be after the request ended.
	body, trace, start := ex.Original, ex.Trace, time.Now()
	// The context stage walked the messages of this very body already, most
	// often: the job then only hashes the user contents, and does not walk a
	// long log again to find them.
	var msgs foundMessages
	msgs.list, msgs.found, msgs.known = reqcontext.ScannedMessages(ex, body)
	// With tracing on, resolving is the span factgate.facts, under the request's.
	_, span := interceptors.StartSpan(ctx, "factgate.facts")
	var request oteltrace.Span // the request's span, when the index's records
	if span.IsRecording() {
		request = oteltrace.SpanFromContext(ctx)
	}
	ex.Hold()
	f.jobs.Add(1)
	go func() {
		defer f.jobs.Done()
		defer span.End()
		defer p.done.Done()
		defer p.finished.Store(true) // before Done: a waiter that sees it unset waits
		defer ex.Release()           // ends the hold: touches nothing else of ex
		defer func() {
			if r := recover(); r != nil {
				p.ix, p.err = nil, fmt.Errorf("facts: resolving the fact index panicked: %v", r)
				trace.Note(p.err.Error() + "; validating against no facts")
			}
		}()
		p.ix, p.info, p.err = f.resolve(ctx, body, msgs, session, trace)
		p.info.Duration = time.Since(start)
		trace.Time("facts", p.info.Duration)
		if span.IsRecording() {
			p.info.annotate(span, request, p.ix.Len())
		}
		st := f.store.memory.Stats()
		f.memory.Set(float64(st.Bytes))
		f.entries.Set(float64(st.Entries))
	}()
	return nil
}

// annotate sets the attributes of the index's span (factgate.facts), and on the
// request's span whether the fact index was a cache hit.
func (info *Info) annotate(span, request oteltrace.Span, operations int) {
	span.SetAttributes(attribute.Int("factgate.facts.operations", operations))
	if info.Source != "" {
		hit := attribute.Bool("factgate.facts.cache_hit", info.Source != SourceBuilt)
		span.SetAttributes(attribute.String("factgate.facts.source", info.Source), hit)
		request.SetAttributes(hit)
	}
	if info.Source == SourceBuilt {
		span.SetAttributes(attribute.Float64("factgate.facts.build_ms", float64(info.BuildTime)/float64(time.Millisecond)))
	}
	if info.Segments > 0 {
		span.SetAttributes(attribute.Int("factgate.facts.session_segments", info.Segments))
	}
}

// FromExchange waits for the fact index the facts stage resolves for ex and
// returns it with how it was resolved. Later phases (validation, revision) call it
// as often as they like; only the first call waits. A nil *Index is an empty
// index. The error reports a failure the stage absorbed — the index is then empty
// and the trace says why — or ErrNoFacts when the chain has no facts stage.
func FromExchange(ex *interceptors.Exchange) (*Index, Info, error) {
	p, _ := ex.Value(pendingKey{}).(*pending)
	if p == nil {
		return nil, Info{}, ErrNoFacts
	}
	p.wait.Do(func() {
		if p.finished.Load() {
			p.done.Wait() // returns at once, and orders the job's writes before the reads
			return
		}
		start := time.Now()
		p.done.Wait()
		p.trace.Time("facts_wait", time.Since(start))
	})
	return p.ix, p.info, p.err
}

// resolve is the background job: key, the three tiers, the session. ctx is the
// request's: the job outlives a client that goes away (what it builds is cached
// for the next request), so the tiers get it without its cancellation — made
// only when a tier beyond memory is asked, as a memory hit does not need it.
func (f *Interceptor) resolve(ctx context.Context, body []byte, msgs foundMessages, session string, trace *interceptors.Trace) (*Index, Info, error) {
	var jobCtx context.Context
	info := Info{Session: session}
	key, texts := f.store.key(body, msgs)
	var own *Index
	if key != "" {
		info.Key = key
		trace.Do(func(t *interceptors.Trace) { t.FactKey = info.Key })
		// A request whose index is in memory (the common case) needs no function
		// to decode its texts: made only for the other tiers, it costs nothing then.
		r, ok := f.store.inMemory(key)
		var err error
		if !ok {
			jobCtx = context.WithoutCancel(ctx)
			r, err = f.store.index(jobCtx, info.Key, f.store.lazyTexts(body, texts), session != "")
		}
		if r.note != "" {
			trace.Note(r.note)
		}
		if err != nil {
			err = fmt.Errorf("facts: resolving the fact index %s: %w", info.Key, err)
			trace.Note(err.Error() + "; validating against no facts")
			return nil, info, err
		}
		own, info.Source, info.BuildTime = r.ix, r.source, r.build
		f.sources[r.source].Inc()
		trace.Note(sourceNote(own.Len(), r.source, r.build, info.Key))
		if own.RecordCount() > 0 || own.RecordsSkipped() > 0 {
			trace.Note(recordsNote(own))
		}
	}
	ix := own
	if session != "" {
		if jobCtx == nil {
			jobCtx = context.WithoutCancel(ctx)
		}
		res := f.store.session(jobCtx, session, info.Key, own, f.sessionTTL, f.maxSegments)
		for _, n := range res.notes {
			trace.Note(n)
		}
		ix = res.ix
		info.Segments, info.MissingSegments, info.DroppedSegments = res.segments, len(res.missing), res.dropped
		info.SessionUnconfirmed = res.unconfirmed
		if res.segments > 1 {
			trace.Note(fmt.Sprintf("facts: session %q: merged %d segments, %d operations", session, res.segments, ix.Len()))
		}
	}
	if ix.Truncated() {
		info.Truncated = true
		trace.Note(fmt.Sprintf("facts: the user text exceeds the extraction bound (max_bytes %s or the rules' max_lines); lines after it were ignored", units.ByteSize(f.maxBytes)))
	}
	return ix, info, nil
}

// sourceNote is the trace note of a resolved index: "facts: <n> operations from
// <source> (key <key>)". Built in one buffer, one allocation, as it is written
// for every request.
func sourceNote(n int, source string, build time.Duration, key string) string {
	var buf [128]byte
	b := append(buf[:0], "facts: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, " operations from "...)
	if source == SourceMemory {
		b = append(b, "memory"...)
	} else {
		b = append(b, sourceText(source, build)...)
	}
	b = append(b, " (key "...)
	b = append(b, key...)
	b = append(b, ')')
	return string(b)
}

func sourceText(source string, build time.Duration) string {
	switch source {
	case SourceMemory:
		return "memory"
	case SourceShared:
		return "the shared cache"
	default:
		return "the request, built in " + build.Round(time.Microsecond).String()
	}
}

func hasText(texts []string) bool {
	for _, t := range texts {
		if t != "" {
			return true
		}
	}
	return false
}

// metrics are the facts stage's Prometheus metrics, shared by every route.
type metrics struct {
	indexes         *prometheus.CounterVec
	builds          prometheus.Histogram
	encoded         prometheus.Histogram
	memory, entries *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) metrics {
	return metrics{
		indexes: interceptors.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factgate_fact_index_total",
			Help: "Fact indexes resolved for requests, by route and by where they came from (memory, shared, built).",
		}, []string{"route", "source"})),
		builds: interceptors.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "factgate_fact_index_build_seconds",
			Help:    "Time to extract a fact index from a request's text (cache misses only).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12), // 100µs .. ~2.4s
		})),
		encoded: interceptors.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "factgate_fact_index_encoded_bytes",
			Help:    "Size of each fact index written to the shared cache (its encoding, MarshalBinary).",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 9), // 1 KiB .. 64 MiB
		})),
		memory: interceptors.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "factgate_fact_index_memory_bytes",
			Help: "Bytes the route's in-process tier of fact indexes (and session records) accounts for against facts.memory_bytes, as of the latest request.",
		}, []string{"route"})),
		entries: interceptors.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "factgate_fact_index_memory_entries",
			Help: "Entries (fact indexes, merged session indexes, session records) in the route's in-process tier, as of the latest request.",
		}, []string{"route"})),
	}
}

// Cleanup implements interceptors.Cleaner: it waits for the resolving jobs
// still running and then for the write-backs to the shared cache, so that a
// shutdown loses no index or session segment it built, or for ctx to end.
func (f *Interceptor) Cleanup(ctx context.Context) error {
	if err := interceptors.Wait(ctx, &f.jobs); err != nil {
		return err
	}
	return interceptors.Wait(ctx, &f.store.writes)
}

var (
	_ interceptors.RequestPhase = (*Interceptor)(nil)
	_ interceptors.Cleaner      = (*Interceptor)(nil)
)
