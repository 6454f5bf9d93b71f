package proxy

import (
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
)

// handleResponses serves POST /v1/responses, the Responses API, routed by model as
// chat completions are (aliases, upstream_model, auth, limits, A/B variants,
// metrics, traces):
//
//   - a model no route serves, with no default route, is a 404 model_not_found,
//     as for a chat completion;
//   - a route without interceptors on an upstream that serves /v1/responses (api:
//     responses) forwards the request with only the model mapped, streaming as
//     it arrives;
//   - otherwise the request runs through the route's chain as a chat completion
//     (responses_request.go) and the answer comes back as a Responses object or
//     event stream. On an api: chat upstream that is the only way it can be
//     served: a route without interceptors translates too.
func (s *Server) handleResponses(rc *fasthttp.RequestCtx) {
	start := time.Now()
	s.metrics.inFlight.Inc()
	defer s.metrics.inFlight.Dec()

	client, body, head, ok := s.admit(rc, start)
	if !ok {
		return
	}
	defer s.settleTokens(rc)
	model := head.model.Str
	rt := s.routeFor(model)
	if rt == nil {
		s.fail(rc, s.passMetrics, start, modelNotFound(model))
		return
	}
	if len(rt.chain) == 0 && rt.up.responsesAPI {
		s.forward(rc, rt.targets, rt.modelSwap(model), rt.metrics, rt.mapModel(body, model), start, client)
		return
	}
	chat, terr := translateResponsesRequest(body, !rt.up.responsesAPI, rt.up.name)
	if terr != nil {
		s.fail(rc, rt.metrics, start, terr)
		return
	}
	rx := &responsesExchange{request: body, chat0: chat, remember: s.rememberInstructions} // intercept copies request
	if rt.responseAlias {
		rx.alias = model
	}
	chatHead := readHead(chat)
	chatHead.model = head.model
	s.intercept(rc, rt, chat, chatHead, client, start, rx)
}

// responsesExchange is what the proxy keeps of a Responses API request while the
// chain works on its chat completion translation.
type responsesExchange struct {
	// request is the client's Responses request as received: a copy in one of
	// the exchange's buffers (intercept makes it), valid until the request is
	// finished.
	request []byte
	// chat0 is its chat completion translation, the chain's request before any
	// interceptor (and before upstream_model).
	chat0 []byte
	// alias is the model the answer carries with response_model: alias; "" keeps
	// the upstream's.
	alias string
	// remember, when set, remembers the app's own instructions (raw) of a
	// response the provider stored (upstream: its object) with factgate's prompt
	// as its instructions (Server.rememberInstructions).
	remember func(trace *interceptors.Trace, upstream []byte, own string)

	mu sync.Mutex
	// draft is an api: responses upstream's Responses object for the draft call,
	// and draftChat its chat translation as the chain saw it; nil on an api: chat
	// upstream.
	draft, draftChat []byte
}

func (rx *responsesExchange) setDraft(raw, chat []byte) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	rx.draft, rx.draftChat = append([]byte(nil), raw...), append([]byte(nil), chat...)
}

// ownInstructions makes the Responses object at path in obj (path "instructions"
// for the object itself, "response.instructions" for an event's) echo the
// client's own instructions, null when it sent none, as the provider echoes the
// request's: an api: responses upstream echoes what it got, the prompt factgate
// injected. obj is returned as it is when it already echoes the client's.
func (rx *responsesExchange) ownInstructions(obj []byte, path string) []byte {
	own := rx.instructions()
	got := gjson.GetBytes(obj, path)
	if !got.Exists() || got.Raw == own || (got.Type == gjson.String && got.Str == gjson.Parse(own).Str && isRawString(own)) {
		return obj
	}
	if b, err := sjson.SetRawBytes(obj, path, []byte(own)); err == nil {
		return b
	}
	return obj
}

// instructions are the client's own instructions, raw ("null" when it sent none).
func (rx *responsesExchange) instructions() string {
	if own := rawMemberOf(bytesView(rx.request), "instructions"); own != "" {
		return own
	}
	return "null"
}

// answer renders the chain's final chat answer (usage summed) as the Responses
// object the client gets: the upstream's own object of the draft carrying the
// final text, when the upstream answered in the Responses API; otherwise the
// translation of the chat answer. ex is the finished exchange.
func (rx *responsesExchange) answer(ex *interceptors.Exchange, final []byte) []byte {
	rx.mu.Lock()
	draft, draftChat := rx.draft, rx.draftChat
	rx.mu.Unlock()
	if draft != nil {
		out := rx.ownInstructions(patchResponse(draft, draftChat, final, rx.alias), "instructions")
		if rx.remember != nil && gjson.GetBytes(out, "instructions").Raw != gjson.GetBytes(draft, "instructions").Raw {
			rx.remember(ex.Trace, draft, rx.instructions())
		}
		return out
	}
	// The object lives until it is written, in one of the exchange's buffers.
	// Lifetime: until finish, or the last Hold's Release (docs/architecture.md, Lifetimes).
	return appendChatResponse(ex.Buffer(len(final)+len(rx.request)/4+512), final, rx.request, ex.Body)
}
