package proxy

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// What factgate injected (Exchange.Injected: the knowledge, the contract, the
// rules) is the proxy's, never the client's to see. An upstream error passes
// through unchanged but for this: servers that refuse a request often quote it
// (FastAPI-based ones — vLLM, LiteLLM — put the offending value under
// detail[].input), and the quote of the injected prompt is replaced by a short
// note saying what was there.

// injectedProbe is how much of the injected prompt's start a quote must repeat
// to be taken for one (a shorter prompt: all of it, from minInjectedQuote bytes).
const (
	injectedProbe    = 64
	minInjectedQuote = 8
)

// injectedNote replaces a quote of n bytes of the injected prompt.
func injectedNote(n int) string {
	return "[factgate: the " + strconv.Itoa(n) + " bytes of knowledge and rules factgate added are not shown]"
}

// withoutInjected returns an upstream error body with every quote of injected
// replaced by injectedNote; body itself when it quotes none. In a JSON body each
// string is read decoded (however the upstream escaped it), and also as the
// JSON text of a request quoted inside a string (escaped once more); a body that
// is not JSON is searched as text.
func withoutInjected(body []byte, injected string) []byte {
	if len(injected) < minInjectedQuote || len(body) == 0 {
		return body
	}
	probe := runePrefixBytes(injected, injectedProbe)
	escaped := jsonInner(injected)
	escProbe := runePrefixBytes(escaped, injectedProbe)
	view := bytesView(body)
	// Most errors quote nothing: they hold neither the prompt's first characters
	// (those that any escaping leaves as they are), nor \u escapes that could
	// hide them.
	if head := plainHead(injected); len(head) >= minInjectedQuote && !strings.Contains(view, head) && !strings.Contains(view, `\u`) {
		return body
	}
	if !gjson.Valid(view) {
		out, _ := cutQuotes(view, injected, probe)
		out, _ = cutQuotes(out, escaped, escProbe)
		return []byte(out)
	}
	out := body
	var paths []string
	var values []string
	eachString(gjson.Parse(view), "", func(path, s string) {
		cut, n := cutQuotes(s, injected, probe)
		cut, m := cutQuotes(cut, escaped, escProbe)
		if n+m > 0 {
			paths, values = append(paths, path), append(values, cut)
		}
	})
	for i, p := range paths {
		if b, err := sjson.SetBytes(out, p, values[i]); err == nil {
			out = b
		}
	}
	return out
}

// cutQuotes replaces in s every run that starts with probe and repeats text
// from its start (as far as it goes) by injectedNote; n counts them.
func cutQuotes(s, text, probe string) (string, int) {
	if !strings.Contains(s, probe) {
		return s, 0
	}
	var b strings.Builder
	n := 0
	for {
		i := strings.Index(s, probe)
		if i < 0 {
			b.WriteString(s)
			return b.String(), n
		}
		j := len(probe)
		for i+j < len(s) && j < len(text) && s[i+j] == text[j] {
			j++
		}
		for j > len(probe) && j < len(text) && !utf8.RuneStart(text[j]) {
			j-- // end on a whole character
		}
		b.WriteString(s[:i])
		b.WriteString(injectedNote(j))
		s = s[i+j:]
		n++
	}
}

// eachString calls fn with the path (sjson syntax) and the decoded text of every
// string value in v, object keys aside.
func eachString(v gjson.Result, path string, fn func(path, s string)) {
	switch {
	case v.Type == gjson.String:
		fn(path, v.Str)
	case v.IsObject():
		v.ForEach(func(k, e gjson.Result) bool {
			eachString(e, joinPath(path, gjson.Escape(k.Str)), fn)
			return true
		})
	case v.IsArray():
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			eachString(e, joinPath(path, strconv.Itoa(i)), fn)
			i++
			return true
		})
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// plainHead is the start of s up to its first character that JSON escapes (a
// quote, a backslash, a control character), at most injectedProbe bytes.
func plainHead(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == '"' || r == '\\' })
	if i < 0 {
		i = len(s)
	}
	return runePrefixBytes(s[:i], injectedProbe)
}

// jsonInner is s as a JSON string writes it, without the quotes.
func jsonInner(s string) string {
	b := rawjson.AppendString(nil, s)
	return string(b[1 : len(b)-1])
}

// runePrefixBytes is the longest prefix of s of at most n bytes that ends on a
// whole character.
func runePrefixBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// A response the provider stores (a Responses request without store: false) is
// stored as the provider answered it: with factgate's prompt as its instructions
// when factgate injected one. GET /v1/responses/{id} passes through, so the proxy
// remembers the app's own instructions of such a response in the cache (memory,
// and Redis when configured, so that every replica answers alike) and puts them
// back into what that GET returns. A cache that fails or forgot leaves the
// provider's answer as it is (fail-open); the trace of the request notes the
// failure to remember.

// storedInstructionsTTL is how long the app's instructions of a stored response
// are remembered: as long as OpenAI keeps a stored response by default.
const storedInstructionsTTL = 30 * 24 * time.Hour

// storedInstructionsKey is the cache key of the app's instructions of response id.
func storedInstructionsKey(id string) string { return "responses:instructions:" + id }

// rememberInstructions remembers, in the background, the app's own instructions
// own (raw JSON) of a response the provider stored (upstream: its object as the
// provider answered it) with factgate's prompt as its instructions; a failure is
// noted in trace.
func (s *Server) rememberInstructions(trace *interceptors.Trace, upstream []byte, own string) {
	if s.cache == nil || !gjson.GetBytes(upstream, "store").Bool() {
		return
	}
	id := gjson.GetBytes(upstream, "id").Str
	if id == "" {
		return
	}
	key, value := storedInstructionsKey(id), []byte(own)
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		ctx, cancel := context.WithTimeout(context.Background(), traceSaveTimeout)
		defer cancel()
		if err := s.cache.Set(ctx, key, value, storedInstructionsTTL); err != nil {
			trace.Note("responses: remembering the app's instructions of stored response " + id + " failed (GET /v1/responses/" + id + " shows factgate's prompt): " + err.Error())
			s.log.Warn("remembering the app's instructions of a stored response failed", "response", id, "error", err)
		}
	}()
}

// withStoredInstructions is the edit of GET /v1/responses/{id}: the app's own
// instructions back into a stored response factgate injected into.
func (s *Server) withStoredInstructions(status int, body []byte) []byte {
	if status != 200 || s.cache == nil || rawjson.Check(body, s.cfg.Server.MaxJSONDepth) != nil {
		return body
	}
	id := gjson.GetBytes(body, "id").Str
	if id == "" {
		return body
	}
	ctx, cancel := context.WithTimeout(context.Background(), traceSaveWait)
	defer cancel()
	own, ok, err := s.cache.Get(ctx, storedInstructionsKey(id))
	if err != nil || !ok {
		return body
	}
	if b, err := sjson.SetRawBytes(body, "instructions", own); err == nil {
		return b
	}
	return body
}

// isStoredResponsePath reports a path of GET /v1/responses/{id} (not its
// input_items).
func isStoredResponsePath(path []byte) bool {
	id, ok := bytes.CutPrefix(path, []byte("/v1/responses/"))
	return ok && len(id) > 0 && bytes.IndexByte(id, '/') < 0
}
