package proxy

import (
	"slices"
	"strings"

	"github.com/valyala/fasthttp"
)

// apiPrefixes serves the factgate API's path prefixes ("/factgate/v1/traces/"),
// longest first: of two prefixes that both match a path, the longer one wins,
// whatever the order they were registered in.
type apiPrefixes []apiPrefix

type apiPrefix struct {
	prefix  string
	handler fasthttp.RequestHandler
}

// add serves handler under prefix; a prefix added again takes the new handler.
func (ps *apiPrefixes) add(prefix string, handler fasthttp.RequestHandler) {
	if i := slices.IndexFunc(*ps, func(p apiPrefix) bool { return p.prefix == prefix }); i >= 0 {
		(*ps)[i].handler = handler
		return
	}
	*ps = append(*ps, apiPrefix{prefix: prefix, handler: handler})
	slices.SortStableFunc(*ps, func(a, b apiPrefix) int { return len(b.prefix) - len(a.prefix) })
}

// match returns the handler of the longest prefix path is below (the prefix
// itself is no match), nil when there is none.
func (ps apiPrefixes) match(path string) fasthttp.RequestHandler {
	for _, p := range ps {
		if len(path) > len(p.prefix) && strings.HasPrefix(path, p.prefix) {
			return p.handler
		}
	}
	return nil
}
