package proxy

import (
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// checkHandler serves POST /factgate/v1/check: the offline check of `factgate
// check` over HTTP, with the proxy's effective knowledge sets (overlays included).
//
// Request: {"facts": "..." or ["segment 1", "segment 2"], "answer": "...",
// optional "knowledge_set", "pack", "scopes": {"factions": ["盟军", "苏联"]} (arrays
// or comma-separated strings), "require_claims": bool}. Response 200:
// {"issues":[{"code","severity","path","message","recommendation"}...]}. Errors use
// the OpenAI envelope: 405 for another method, 400 for malformed JSON or a missing
// or mistyped field, 413 when the facts exceed validate.DefaultMaxFactsBytes (or
// the whole body exceeds server.max_check_body, or server.max_request_body, which
// fasthttp refuses before the handler runs); 429 when the caller's requests per
// minute are spent (a check counts as a request).
func (s *Server) checkHandler() fasthttp.RequestHandler {
	off, err := validate.NewOffline(s.library.Registry().Packs(), s.library.Set, validate.OfflineOptions{})
	if err != nil {
		s.log.Warn("POST /factgate/v1/check is unavailable", "error", err)
		return func(rc *fasthttp.RequestCtx) {
			writeError(rc, interceptors.Errorf(404, "invalid_request_error", "check_unavailable", "no pack checks answers offline: %v", err))
		}
	}
	return func(rc *fasthttp.RequestCtx) {
		if !rc.IsPost() {
			writeError(rc, interceptors.Errorf(405, "invalid_request_error", "method_not_allowed", "use POST /factgate/v1/check"))
			return
		}
		// A check costs CPU and no upstream tokens: it counts against the
		// caller's requests per minute like any request, and its body has a bound
		// of its own (server.max_check_body).
		client, _ := rc.UserValue(clientKeyValue).(string)
		if !s.checkRateLimit(rc, client, time.Now()) {
			return
		}
		if limit, key := s.bodyLimit(rc); int64(len(rc.PostBody())) > limit {
			writeError(rc, tooLarge(limit, key))
			return
		}
		s.setRateLimitHeaders(rc)
		req, e := parseCheckRequest(rc.PostBody(), s.cfg.Server.MaxJSONDepth)
		if e != nil {
			writeError(rc, e)
			return
		}
		rep, err := off.Check(req)
		if err != nil {
			if e := interceptors.AsError(err); e != nil {
				writeError(rc, e)
				return
			}
			writeError(rc, &interceptors.Error{Status: 500, Type: "server_error", Code: "check_failed", Message: "checking the answer failed", Err: err})
			return
		}
		rc.SetContentType("application/json")
		rc.Response.Header.Set(validate.HeaderIssues, interceptors.CountSeverities(rep.Issues).String())
		rc.SetBody(validate.MarshalIssues(rep.Issues))
	}
}

// parseCheckRequest reads the check request body, nested at most maxDepth levels
// deep; the strings are copies.
func parseCheckRequest(body []byte, maxDepth int) (validate.CheckRequest, *interceptors.Error) {
	var req validate.CheckRequest
	bad := func(param, code, format string, args ...any) (validate.CheckRequest, *interceptors.Error) {
		e := interceptors.Errorf(400, "invalid_request_error", code, format, args...)
		e.Param = param
		return validate.CheckRequest{}, e
	}
	if err := rawjson.Check(body, maxDepth); err != nil {
		return validate.CheckRequest{}, invalidJSON(err)
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return bad("", "invalid_request", `request body must be a JSON object {"facts": ..., "answer": ...}`)
	}
	answer := root.Get("answer")
	switch {
	case !answer.Exists():
		return bad("answer", "missing_answer", "request has no answer (the model's whole answer text, with its claims block)")
	case answer.Type != gjson.String:
		return bad("answer", "invalid_answer", "answer must be a string")
	}
	req.Answer = answer.Str
	f := root.Get("facts")
	switch {
	case !f.Exists():
		return bad("facts", "missing_facts", `request has no facts (the operation log, or ["segment 1", "segment 2"] for a session)`)
	case f.Type == gjson.String:
		req.Facts = []string{f.Str}
	case f.IsArray():
		var e *interceptors.Error
		f.ForEach(func(i, v gjson.Result) bool {
			if v.Type != gjson.String {
				_, e = bad("facts", "invalid_facts", "facts[%d] must be a string", i.Int())
				return false
			}
			req.Facts = append(req.Facts, v.Str)
			return true
		})
		if e != nil {
			return validate.CheckRequest{}, e
		}
	default:
		return bad("facts", "invalid_facts", "facts must be a string or an array of strings (the segments of one session, in order)")
	}
	for _, field := range []struct {
		name string
		dst  *string
	}{{"knowledge_set", &req.KnowledgeSet}, {"pack", &req.Pack}} {
		v := root.Get(field.name)
		if !v.Exists() || v.Type == gjson.Null {
			continue
		}
		if v.Type != gjson.String {
			return bad(field.name, "invalid_"+field.name, "%s must be a string", field.name)
		}
		*field.dst = v.Str
	}
	if rcl := root.Get("require_claims"); rcl.Exists() && rcl.Type != gjson.Null {
		if rcl.Type != gjson.True && rcl.Type != gjson.False {
			return bad("require_claims", "invalid_require_claims", "require_claims must be true or false")
		}
		b := rcl.Bool()
		req.RequireClaims = &b
	}
	if sc := root.Get("scopes"); sc.Exists() && sc.Type != gjson.Null {
		if !sc.IsObject() {
			return bad("scopes", "invalid_scopes", `scopes must be an object such as {"factions": ["盟军", "苏联"]}`)
		}
		req.Scopes = knowledge.Scopes{}
		var e *interceptors.Error
		sc.ForEach(func(dim, v gjson.Result) bool {
			var values []string
			switch {
			case v.Type == gjson.String:
				for _, s := range strings.Split(v.Str, ",") {
					if s = strings.TrimSpace(s); s != "" {
						values = append(values, s)
					}
				}
			case v.IsArray():
				v.ForEach(func(_, item gjson.Result) bool {
					if item.Type != gjson.String {
						_, e = bad("scopes", "invalid_scopes", "scopes.%s must hold strings", dim.Str)
						return false
					}
					values = append(values, item.Str)
					return true
				})
			default:
				_, e = bad("scopes", "invalid_scopes", "scopes.%s must be an array of strings or a comma-separated string", dim.Str)
			}
			req.Scopes[dim.Str] = values
			return e == nil
		})
		if e != nil {
			return validate.CheckRequest{}, e
		}
	}
	return req, nil
}
