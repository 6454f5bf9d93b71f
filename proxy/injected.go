package proxy

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

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
