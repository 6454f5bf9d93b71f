package proxy

import (
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// requestHead is what the proxy reads of a chat request's top level before the
// chain runs: the model that picks the route and the streaming options that pick
// the answer's form.
type requestHead struct {
	// model is the "model" member as gjson reads it (a string, or anything else
	// the admission check rejects).
	model gjson.Result
	// stream and includeUsage are "stream" and "stream_options.include_usage",
	// read as gjson's Bool reads them.
	stream, includeUsage bool
	// scan is what the context stage reads of the top-level members, found in
	// the same walk: intercept hands it on (reqcontext.KeepScan). Nil for an
	// empty body.
	scan *reqcontext.RequestScan
}

// readHead reads the request head of body (rawjson-checked JSON) in one walk of
// its top-level members: gjson.Get would skip the whole body (a 24 KB replay in a
// user message) once per member it looks for, and once more for each one that is
// absent. As in gjson, the first of duplicate members counts. The walk is the
// context stage's scan of the body too (reqcontext.ScanRequest), so that a route
// with a pack does not walk the replay again.
func readHead(body []byte) requestHead {
	var h requestHead
	if len(body) == 0 {
		return h
	}
	// unsafe: a string over b without a copy, read only while b is unchanged (docs/architecture.md, Lifetimes).
	s := unsafe.String(unsafe.SliceData(body), len(body))
	var seenModel, seenStream, seenOptions bool
	h.scan = reqcontext.ScanRequest(body, func(key string, v int) int {
		var seen *bool
		switch {
		case rawjson.KeyIs(key, "model"):
			seen = &seenModel
		case rawjson.KeyIs(key, "stream"):
			seen = &seenStream
		case rawjson.KeyIs(key, "stream_options"):
			seen = &seenOptions
		default:
			return -1
		}
		e := rawjson.ValueEnd(s, v)
		if e < 0 || *seen {
			return e
		}
		switch seen {
		case &seenModel:
			// Copied out of the body: the head outlives edits of it.
			h.model = gjson.Parse(string(body[v:e]))
		case &seenStream:
			h.stream = gjson.Parse(s[v:e]).Bool()
		default:
			// gjson reads a path below a member on in the next member of the
			// same name when the first lacks it.
			u := gjson.Get(s[v:e], "include_usage")
			if !u.Exists() {
				return e
			}
			h.includeUsage = u.Bool()
		}
		*seen = true
		return e
	})
	return h
}
