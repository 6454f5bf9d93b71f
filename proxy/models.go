package proxy

import (
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// The model list (GET /v1/models) is the upstream's, plus every route alias: an
// app that lists models before using one finds the alias it was told to use. A
// route alias is answered by factgate itself (GET /v1/models/{alias}); every other
// model id goes to the upstream.

// aliasOwner is the owned_by of a route alias in the model list.
const aliasOwner = "factgate"

// serveModels answers GET /v1/models and GET /v1/models/{alias}; it reports
// false for every other request, which the caller forwards.
func (s *Server) serveModels(rc *fasthttp.RequestCtx, client string, start time.Time) bool {
	if !rc.IsGet() {
		return false
	}
	path := string(rc.Path())
	switch {
	case path == "/v1/models":
		s.forwardEdited(rc, s.passTargets, nil, s.passMetrics, nil, start, client, s.withAliases)
		return true
	case strings.HasPrefix(path, "/v1/models/"):
		id := strings.TrimPrefix(path, "/v1/models/")
		if s.routes[id] == nil {
			return false
		}
		rc.SetContentType("application/json")
		rc.SetBody(s.appendAlias(nil, id))
		total := time.Since(start)
		rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(total))
		s.passMetrics.observe(200, total, 0)
		s.logAccess(s.passMetrics.name, rc, 200, total, 0, client, "")
		return true
	}
	return false
}

// aliases returns every route alias, in config order.
func (s *Server) aliases() []string {
	var out []string
	for _, rc := range s.cfg.Routes {
		out = append(out, rc.Models...)
	}
	return out
}

// appendAlias appends the model object of a route alias.
func (s *Server) appendAlias(b []byte, id string) []byte {
	b = append(b, `{"id":`...)
	b = rawjson.AppendString(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, s.started.Unix(), 10)
	b = append(b, `,"owned_by":"`+aliasOwner+`"}`...)
	return b
}

// withAliases adds the route aliases to the upstream's model list: each alias
// replaces an upstream entry with its id (the route serves that name) or is
// appended. Any other answer — an error, a body that is not a list — passes
// unchanged.
func (s *Server) withAliases(status int, body []byte) []byte {
	if status != 200 || rawjson.Check(body, s.cfg.Server.MaxJSONDepth) != nil {
		return body
	}
	data := gjson.GetBytes(body, "data")
	if !data.IsArray() {
		return body
	}
	aliases := s.aliases()
	if len(aliases) == 0 {
		return body
	}
	isAlias := make(map[string]bool, len(aliases))
	for _, a := range aliases {
		isAlias[a] = true
	}
	list := make([]byte, 0, len(data.Raw)+len(aliases)*80)
	list = append(list, '[')
	n := 0
	data.ForEach(func(_, m gjson.Result) bool {
		if isAlias[m.Get("id").String()] {
			return true
		}
		if n > 0 {
			list = append(list, ',')
		}
		list = append(list, m.Raw...)
		n++
		return true
	})
	for _, a := range aliases {
		if n > 0 {
			list = append(list, ',')
		}
		list = s.appendAlias(list, a)
		n++
	}
	list = append(list, ']')
	out, err := sjson.SetRawBytes(body, "data", list)
	if err != nil {
		return body
	}
	return out
}
