package reqcontext

import (
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// Applies returns the route's pack's verdict on ex's request (knowledge.ApplyRules):
// is it one the pack is about, and does the pack's contract — with validation and
// the hidden revision — apply to it? The context stage judges every request of a
// route with a pack (Context.Applies); on a chain without one it is judged here, on
// the client's request, once per exchange. A nil pack applies to nothing.
func Applies(ex *interceptors.Exchange, pack *knowledge.Pack) knowledge.Applicability {
	if pack == nil {
		return knowledge.Applicability{Reason: "the route has no pack"}
	}
	if c, ok := FromExchange(ex); ok && c.Applies.Reason != "" {
		return c.Applies
	}
	if a, ok := ex.Value(appliesKey{}).(knowledge.Applicability); ok {
		return a
	}
	body := ex.Original
	if body == nil {
		body = ex.Body
	}
	req, ok := keptScan(ex, body)
	if !ok {
		req = scanRequest(bytesView(body), nil, nil)
	}
	a := judge(pack, bytesView(body), req, boundsOf(pack), ex)
	ex.SetValue(appliesKey{}, a)
	return a
}

type appliesKey struct{}

// judge applies the pack's rules to a request body, whose members are req;
// bounds bound each user text decoded, into buf's buffers (userHeads).
func judge(pack *knowledge.Pack, body string, req requestMembers, bounds headBounds, buf bufferSource) knowledge.Applicability {
	return pack.Applies(knowledge.ApplyInput{
		Heads:    newUserHeads(body, req.messages, bounds, buf),
		JSONMode: jsonFormat(req.responseFormat),
	})
}

// IsJSONMode reports whether the request asks for a JSON answer: response_format
// json_object or json_schema.
func IsJSONMode(body string) bool {
	rf, ok := rawjson.Find(body, "response_format")
	return ok && jsonFormat(rf.Raw)
}

// jsonFormat reports whether a response_format value (raw JSON; "" when absent)
// asks for JSON: type json_object or json_schema.
func jsonFormat(rf string) bool {
	if len(rf) == 0 || rf[0] != '{' {
		return false
	}
	t := gjson.Get(rf, "type").Str
	return t == "json_object" || t == "json_schema"
}

// clientMentions reports whether a system, developer or user message of the
// body's messages ml contains s (in its string content or a text part).
func clientMentions(body string, ml MessageList, s string) bool {
	return mentions(body, ml, []string{"system", "developer", "user"}, s)
}

// mentions reports whether a message of one of roles of the body's messages ml
// contains s (in its string content or a text part).
func mentions(body string, ml MessageList, roles []string, s string) bool {
	// s as JSON writes it unescaped: a content without \u escapes contains s iff
	// its raw JSON does, which costs a scan instead of decoding a long log.
	plain := !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == '"' || r == '\\' })
	for _, m := range ml.Items {
		if !slices.Contains(roles, m.Role) || m.ContentEnd == 0 {
			continue
		}
		raw := body[m.ContentStart:m.ContentEnd]
		if plain && !strings.Contains(raw, `\u`) {
			if strings.Contains(raw, s) {
				return true
			}
			continue
		}
		c := gjson.Parse(raw)
		switch {
		case c.Type == gjson.String:
			if strings.Contains(c.Str, s) {
				return true
			}
		case c.IsArray():
			found := false
			c.ForEach(func(_, part gjson.Result) bool {
				t := part.Get("type").Str
				found = (t == "text" || t == "input_text" || t == "output_text") && strings.Contains(part.Get("text").Str, s)
				return !found
			})
			if found {
				return true
			}
		}
	}
	return false
}
