package proxy

import (
	"context"
	"crypto/subtle"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors"
)

// cacheTraces keeps traces in the cache (shared through Redis when configured, so
// any replica can answer for any trace) under "trace:{id}".
type cacheTraces struct {
	c       cache.Cache
	ttl     time.Duration
	content bool
}

func traceKey(id string) string { return "trace:" + cache.HashTag(id) }

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
	return t.c.Set(ctx, traceKey(tr.ID), b, t.ttl)
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
