// Package inject is the prompt injection stage: it puts the domain knowledge that
// fits the request — rendered from the knowledge set and scopes the context stage
// resolved — the pack's contract and the route's additional rules into one system
// message at the front of the request's messages (PRODUCT.md §4).
//
// The request is edited in place: only the messages array changes, and within it
// only the system messages; every other byte of the body — fields factgate does not
// know, the other messages — goes upstream as the client sent it.
package inject

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/knowledge"
)

// Injector is the inject stage: one request phase.
//
// It fails open: when there is nothing it can inject (no knowledge set resolved, no
// messages array), the request goes upstream as the client sent it and the trace
// says why. It never fails a request.
//
// Composed prompts are cached per (effective set, scopes, contract on/off, custom
// prompt, rules) as their JSON bytes, so a request on a cached prompt costs one
// scan of the body and one copy into the edited body.
type Injector struct {
	s        settings
	pack     *knowledge.Pack // nil on a route without a pack
	lib      *knowledge.Library
	contract string // the pack's contract text; "" when it has none
	marker   string // the pack's claims marker; "" when it has none
	cache    *promptCache
}

// New builds the inject stage for a route from its `inject` block (nil means all
// defaults). It reads the prompt files and checks the settings against the route's
// pack; errors name the key. deps.Library is required when the route has a pack.
func New(cfg *Config, deps interceptors.Deps) (*Injector, error) {
	s, err := cfg.load(deps)
	if err != nil {
		return nil, err
	}
	in := &Injector{s: s, pack: deps.Pack, lib: deps.Library, cache: newPromptCache(DefaultCacheSize)}
	if p := deps.Pack; p != nil {
		if deps.Library == nil {
			return nil, errors.New("the inject stage needs the knowledge library")
		}
		in.contract = PackContract(p)
		if p.Claims != nil {
			in.marker = p.Claims.Marker
		}
	}
	return in, nil
}

// Name implements interceptors.Interceptor.
func (in *Injector) Name() string { return "inject" }

func isSystem(role string) bool { return role == "system" || role == "developer" }

// OnRequest implements interceptors.RequestPhase.
func (in *Injector) OnRequest(_ context.Context, ex *interceptors.Exchange) error {
	body := ex.Body
	// From the context stage's scan when no stage replaced the body since: the
	// messages hold the operation log, which is not walked again.
	ml, ok := reqcontext.Messages(ex, body)
	if !ok {
		ex.Trace.Note("inject: the request has no messages array; sent as is")
		return nil
	}
	nsys := 0
	for _, m := range ml.Items {
		if isSystem(m.Role) {
			nsys++
		}
	}
	if in.s.policy == Keep && nsys > 0 {
		ex.Trace.Note("inject: system_message keep and the client sent its own system message; nothing injected")
		return nil
	}
	applies := knowledge.Applicability{Domain: true, Contract: true}
	if in.pack != nil {
		applies = reqcontext.Applies(ex, in.pack)
	}
	if !applies.Domain && in.s.when == WhenFacts {
		ex.Trace.Note("inject: not a request pack " + in.pack.Name + " is about (inject.when: facts); nothing injected")
		return nil
	}

	pin := promptInputs{rules: in.s.rules, contract: applies.Contract && in.contractOn(ex)}
	if r := ex.Overrides.AdditionalRules; r != nil {
		pin.rules = *r
	}
	var set *knowledge.Set
	sc, _ := reqcontext.FromExchange(ex)
	switch {
	case ex.Overrides.CustomPrompt != nil:
		pin.useCustom, pin.custom = true, *ex.Overrides.CustomPrompt
	case in.s.useCustom:
		pin.useCustom, pin.custom = true, in.s.custom
	case sc == nil || sc.Set == nil:
		ex.Trace.Note("inject: no knowledge set was resolved for the request, so there is no knowledge to render; sent as is")
		return nil
	default:
		set, pin.scopes = sc.Set, sc.Scopes
	}
	p := in.cache.get(set, &pin, in.s.heading, func() string {
		parts := Parts{AdditionalRules: pin.rules}
		if pin.useCustom {
			parts.Knowledge = pin.custom
		} else {
			parts.Knowledge = in.lib.Renderer().Render(set, pin.scopes)
		}
		if pin.contract {
			parts.Contract = in.contract
		}
		return Compose(parts)
	})

	var client []byte // the merged client texts, JSON-escaped
	merged := 0
	if in.s.policy == Merge && nsys > 0 {
		client, merged = clientTexts(body, ml)
	}
	if p.text == "" && len(client) == 0 {
		ex.Trace.Note("inject: the composed prompt is empty; sent as is")
		return nil
	}

	// The edited body lives as long as the exchange, in a buffer the proxy reuses.
	out := ex.Buffer(len(body) + len(p.head) + len(p.mergeLead) + len(client) + 4)
	out = append(out, body[:ml.Start]...)
	out = append(out, '[')
	out = append(out, p.head...)
	if len(client) > 0 {
		out = append(out, p.mergeLead...)
		out = append(out, client...)
	}
	out = append(out, '"', '}')
	for _, m := range ml.Items {
		if isSystem(m.Role) {
			continue // merged into ours, or replaced (keep never gets here with one)
		}
		out = append(out, ',')
		out = append(out, body[m.Start:m.End]...)
	}
	out = append(out, ']')
	out = append(out, body[ml.End:]...)

	injected := pin.contract && in.contract != "" && !(in.marker != "" && clientAsks(body, ml, in.marker))
	ex.ContractInjected = injected
	ex.Injected = p.text
	ex.Body = out
	ex.Trace.Note(in.describe(sc, p, nsys, merged, injected))
	return nil
}

// contractOn decides whether the contract is part of this request's prompt.
func (in *Injector) contractOn(ex *interceptors.Exchange) bool {
	if in.contract == "" {
		return false
	}
	switch in.s.contract {
	case ContractAlways:
		return true
	case ContractNever:
		return false
	}
	if v := ex.Overrides.Validate; v != nil {
		return in.s.canValidate && *v
	}
	return in.s.validates
}

// clientTexts returns the client's system message texts as JSON-escaped bytes, in
// the form Compose gives them (text parts of one message joined by a newline,
// messages by a blank line), taken from the body's raw JSON without decoding, and
// how many messages contributed. A single text — the common case — is returned
// as a view of body, capped at its length so that appending to it copies; more
// are joined in a slice of their own.
func clientTexts(body []byte, ml reqcontext.MessageList) ([]byte, int) {
	var out []byte
	n := 0
	for _, m := range ml.Items {
		if !isSystem(m.Role) {
			continue
		}
		wrote := false
		eachTextRaw(m.Content(body), func(inner []byte) {
			if len(inner) == 0 {
				return
			}
			switch {
			case len(out) == 0:
				out = inner[:len(inner):len(inner)]
			case wrote:
				out = append(append(out, `\n`...), inner...)
			default:
				out = append(append(out, `\n\n`...), inner...)
			}
			wrote = true
		})
		if wrote {
			n++
		}
	}
	return out, n
}

// eachTextRaw calls fn with the raw inside (between the quotes) of a content's
// text: the string itself, or each part of type "text" of an array.
func eachTextRaw(content []byte, fn func(inner []byte)) {
	if len(content) < 2 {
		return
	}
	switch content[0] {
	case '"':
		fn(content[1 : len(content)-1])
	case '[':
		gjson.Parse(bytesView(content)).ForEach(func(_, part gjson.Result) bool {
			if part.Get("type").Str == "text" {
				if t := part.Get("text"); t.Type == gjson.String && len(t.Raw) >= 2 {
					fn([]byte(t.Raw[1 : len(t.Raw)-1]))
				}
			}
			return true
		})
	}
}

// clientAsks reports whether one of the client's system messages contains marker,
// i.e. the client's own prompt asks for the claims block.
func clientAsks(body []byte, ml reqcontext.MessageList, marker string) bool {
	for _, m := range ml.Items {
		if !isSystem(m.Role) {
			continue
		}
		c := gjson.Parse(bytesView(m.Content(body)))
		switch {
		case c.Type == gjson.String:
			if strings.Contains(c.Str, marker) {
				return true
			}
		case c.IsArray():
			found := false
			c.ForEach(func(_, part gjson.Result) bool {
				found = strings.Contains(part.Get("text").Str, marker)
				return !found
			})
			if found {
				return true
			}
		}
	}
	return false
}

// describe renders the trace note: what was injected and how.
func (in *Injector) describe(sc *reqcontext.Context, p *prompt, nsys, merged int, contract bool) string {
	b := make([]byte, 0, 160)
	b = append(b, "inject: "...)
	if p.in.useCustom {
		b = append(b, "custom prompt"...)
	} else if sc != nil {
		b = append(b, "knowledge set "...)
		b = append(b, sc.KnowledgeSet...)
		if sc.Set != nil && sc.Set.Version > 0 {
			b = append(b, " overlay v"...)
			b = strconv.AppendUint(b, sc.Set.Version, 10)
		}
	}
	if contract {
		b = append(b, " + contract"...)
	} else if p.in.contract {
		b = append(b, " + contract (the client asked for claims itself)"...)
	}
	if strings.TrimSpace(p.in.rules) != "" {
		b = append(b, " + additional rules"...)
	}
	b = append(b, "; prompt "...)
	b = strconv.AppendInt(b, int64(len(p.text)), 10)
	b = append(b, " bytes; system_message "...)
	b = append(b, in.s.policy...)
	if nsys > 0 {
		b = append(b, ": "...)
		b = strconv.AppendInt(b, int64(nsys), 10)
		if in.s.policy == Merge {
			b = append(b, " client system message(s), "...)
			b = strconv.AppendInt(b, int64(merged), 10)
			b = append(b, " with text merged"...)
		} else {
			b = append(b, " client system message(s) dropped"...)
		}
	}
	return string(b)
}

// bytesView returns b as a string without copying (gjson.ParseBytes copies the
// content), for reading only while b is: nothing read from it is kept.
//
// unsafe: a string over b without a copy, read only while b is unchanged (docs/architecture.md, Lifetimes).
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// Interface guard.
var (
	_ interceptors.RequestPhase    = (*Injector)(nil)
	_ interceptors.PromptPreviewer = (*Injector)(nil)
)
