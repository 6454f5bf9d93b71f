package proxy

import (
	"context"
	"crypto/subtle"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
)

// cacheTraces keeps traces under "trace:{id}" in a memory tier of their own
// (traces.memory_bytes), in front of the cache's Redis when one is configured, so
// any replica can answer for any trace while traces never evict the cache's fact
// indexes or A/B counters. Each trace is bounded by traces.max_bytes.
type cacheTraces struct {
	c        cache.Cache
	ttl      time.Duration
	content  bool
	maxBytes int
	// inMemory reports a store without Redis: a save is a copy into memory.
	inMemory bool
}

// SavesInMemory implements memoryTraceStore.
func (t cacheTraces) SavesInMemory() bool { return t.inMemory }

// newCacheTraces builds the trace store over shared with its own memory tier, and
// exports that tier's metrics (factgate_traces_memory_*) on reg.
func newCacheTraces(shared cache.Cache, cfg TracesConfig, reg prometheus.Registerer) (cacheTraces, func() error, error) {
	c, memory := cache.Separate(shared, cache.MemoryConfig{MaxBytes: cfg.MemoryBytes, DefaultTTL: cfg.TTL})
	closeFn := func() error { return nil }
	if memory != nil {
		if err := cache.RegisterMemoryMetrics(reg, memory, "traces"); err != nil {
			return cacheTraces{}, nil, err
		}
		closeFn = c.Close // the trace tier only; the shared cache closes itself
	}
	_, inMemory := c.(*cache.Memory)
	return cacheTraces{c: c, ttl: time.Duration(cfg.TTL), content: cfg.Content == nil || *cfg.Content, maxBytes: int(cfg.MaxBytes), inMemory: inMemory}, closeFn, nil
}

// traceKey is "trace:" + cache.HashTag(id), built in one concatenation (one
// allocation, not two: it is made for every request).
func traceKey(id string) string { return "trace:{" + id + "}" }

// SaveTrace implements TraceStore.
func (t cacheTraces) SaveTrace(ctx context.Context, tr *interceptors.Trace) error {
	if !t.content {
		tr.Do(func(tr *interceptors.Trace) {
			for i := range tr.Attempts {
				tr.Attempts[i].Content = ""
			}
		})
	}
	// MarshalJSON directly: json.Marshal would re-scan and compact its output.
	b, err := tr.MarshalJSON()
	if err != nil {
		return err
	}
	if t.maxBytes > 0 && len(b) > t.maxBytes {
		if b, err = shrinkTrace(tr, b, t.maxBytes); err != nil {
			return err
		}
	}
	// Durable: a trace saved while Redis fails is replayed when it is back (and
	// flushed at shutdown), so that the other replicas can serve it; traces may
	// hold a quarter of cache.tiered.max_pending_bytes among the pending writes.
	return cache.SetDurable(ctx, t.c, traceKey(tr.ID), b, t.ttl)
}

// shrinkTrace cuts the texts of tr — its answers and the client's messages the
// console keeps — whose encoding b is over maxBytes, so that it fits: each text
// keeps a share of the room left beside the rest of the trace, proportional to its
// length, cut at a character boundary; when there is no room, the texts are
// dropped. Everything else — attempts, issues, timings, notes — is kept, and a
// note says what was cut. A trace whose structure alone is over the bound is
// stored without texts.
func shrinkTrace(tr *interceptors.Trace, b []byte, maxBytes int) ([]byte, error) {
	original := len(b)
	var texts []string
	tr.Do(func(tr *interceptors.Trace) {
		eachTraceText(tr, func(s *string, _ *bool) {
			texts = append(texts, *s)
			*s = ""
		})
	})
	bare, err := tr.MarshalJSON()
	if err != nil {
		return nil, err
	}
	raw := 0
	for _, t := range texts {
		raw += len(t)
	}
	const noteRoom = 256 // the note itself
	room := maxBytes - len(bare) - noteRoom
	encoded := original - len(bare) // the texts as JSON, escapes included
	dropped := fmt.Sprintf("trace: texts (%d bytes) dropped to fit traces.max_bytes (%s); the trace was %d bytes", raw, units.ByteSize(maxBytes), original)
	if room <= 0 || encoded <= 0 {
		tr.Do(func(tr *interceptors.Trace) {
			eachTraceText(tr, func(_ *string, truncated *bool) {
				if truncated != nil {
					*truncated = true
				}
			})
		})
		tr.Note(dropped)
		return tr.MarshalJSON()
	}
	kept := 0
	tr.Do(func(tr *interceptors.Trace) {
		i := 0
		eachTraceText(tr, func(s *string, truncated *bool) {
			c := cutText(texts[i], int(int64(len(texts[i]))*int64(room)/int64(encoded)))
			*s = c
			if truncated != nil && len(c) < len(texts[i]) {
				*truncated = true
			}
			kept += len(c)
			i++
		})
		tr.Notes = append(tr.Notes, fmt.Sprintf("trace: texts cut from %d to %d bytes to fit traces.max_bytes (%s); the trace was %d bytes", raw, kept, units.ByteSize(maxBytes), original))
	})
	out, err := tr.MarshalJSON()
	if err != nil || len(out) <= maxBytes {
		return out, err
	}
	// Texts that escape more than the rest (quotes, HTML characters) overshot.
	tr.Do(func(tr *interceptors.Trace) {
		eachTraceText(tr, func(s *string, _ *bool) { *s = "" })
		tr.Notes[len(tr.Notes)-1] = dropped
	})
	return tr.MarshalJSON()
}

// eachTraceText calls f with each text of tr that shrinkTrace may cut, in a fixed
// order: the attempts' answers, then the request's messages (whose Truncated flag
// f may set; nil for an answer). Call it inside tr.Do.
func eachTraceText(tr *interceptors.Trace, f func(text *string, truncated *bool)) {
	for i := range tr.Attempts {
		f(&tr.Attempts[i].Content, nil)
	}
	if tr.Request != nil {
		for i := range tr.Request.Messages {
			m := &tr.Request.Messages[i]
			f(&m.Content, &m.Truncated)
		}
	}
}

// cutText returns at most n bytes of s, ending at a character boundary, with an
// ellipsis when it cut anything.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// LoadTrace implements TraceStore.
func (t cacheTraces) LoadTrace(ctx context.Context, id string) ([]byte, bool, error) {
	return t.c.Get(ctx, traceKey(id))
}

// clientKeyValue is the RequestCtx user value under which the factgate API's
// handlers find the name of the client key that authenticated the request.
const clientKeyValue = "factgate.client_key"

// newTrace starts the trace of a request on route, owned by whoever made it (see
// requestOwner).
func (s *Server) newTrace(rc *fasthttp.RequestCtx, route, client string) *interceptors.Trace {
	t := interceptors.NewTrace(route)
	t.Owner = s.requestOwner(rc, client)
	return t
}

// handleTrace serves GET /factgate/v1/traces/{id}: a trace is readable by the
// client that made its request (the same client key; in passthrough mode the same
// credential) and by admin keys. Any other reader gets the same 404 as for a
// trace that does not exist, so the API never says whether an id is in use.
func (s *Server) handleTrace(rc *fasthttp.RequestCtx) {
	id := string(rc.Path()[len("/factgate/v1/traces/"):])
	if !rc.IsGet() {
		writeError(rc, interceptors.Errorf(405, "invalid_request_error", "method_not_allowed", "use GET /factgate/v1/traces/{id}"))
		return
	}
	if s.traces == nil {
		writeError(rc, interceptors.Errorf(404, "invalid_request_error", "traces_disabled", "this proxy keeps no traces"))
		return
	}
	client, _ := rc.UserValue(clientKeyValue).(string)
	admin := s.isAdmin(client)
	reader := s.requestOwner(rc, client)
	if reader == "" && !admin {
		// Only passthrough mode gets here: a request without a credential.
		writeError(rc, interceptors.Errorf(401, "authentication_error", "missing_api_key",
			"a trace is readable only with the credential of the request that made it: send the same Authorization header"))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b, ok, err := s.traces.LoadTrace(ctx, id)
	if err != nil {
		writeError(rc, interceptors.Errorf(503, "server_error", "trace_store_unavailable", "reading trace %s: %v", id, err))
		return
	}
	if ok && !admin {
		owner := gjson.GetBytes(b, "owner").Str
		ok = subtle.ConstantTimeCompare([]byte(owner), []byte(reader)) == 1
	}
	if !ok {
		writeError(rc, interceptors.Errorf(404, "invalid_request_error", "trace_not_found",
			"no trace %q (traces are kept for traces.ttl after the request)", id))
		return
	}
	rc.SetContentType("application/json")
	rc.SetBody(b)
}
