package reqcontext

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// Interceptor is the context stage: one request phase that resolves the request
// context (see the package doc), stores it in the exchange (FromExchange), records
// it in the trace and strips factgate's metadata keys from the outgoing body.
//
// It fails closed only for the client's own mistakes — a knowledge set name the
// route's pack does not have, a malformed header or metadata value — with a 400 in
// the OpenAI error envelope that names the field and the known sets. Everything
// else falls through to the next step: a request without an operation log gets the
// default set, without error.
type Interceptor struct {
	pack   *knowledge.Pack
	lib    *knowledge.Library
	route  Config
	dims   []string     // every dimension the pack knows, sorted
	header []headerName // each of dims' X-Factgate-Scope-* header
	bounds headBounds   // how much of each user text the pack's rules read
	// extracted holds, for each set of dims whose values all came from the
	// extraction (bit i: dims[i]), the ScopeSources saying so: read-only, shared
	// by every request with that set (nil when the pack has too many dimensions).
	extracted []map[string]Source
	// dimSets holds, for each set of dims (bit i: dims[i]), its dimensions in
	// order: the sorted keys of a context's Scopes, for describe (nil with too
	// many dimensions, as extracted).
	dimSets [][]string
}

// maxSharedSources bounds the dimensions for which New makes every extracted
// ScopeSources up front (2^n maps): a pack has two or three.
const maxSharedSources = 4

// New builds the context stage for a route. cfg holds the route's defaults (nil:
// none); deps.Pack and deps.Library are required. Errors name the offending key.
func New(cfg *Config, deps interceptors.Deps) (*Interceptor, error) {
	if deps.Pack == nil {
		return nil, errors.New("the context stage needs the route's pack (set pack)")
	}
	if deps.Library == nil {
		return nil, errors.New("the context stage needs the knowledge library")
	}
	r := &Interceptor{pack: deps.Pack, lib: deps.Library}
	r.dims = packDimensions(deps.Pack, deps.Library)
	route, err := cfg.validate(deps.Pack, deps.Library, r.dims)
	if err != nil {
		return nil, err
	}
	r.route = route
	for _, d := range r.dims {
		r.header = append(r.header, newHeaderName(HeaderScopePrefix+strings.ToUpper(d[:1])+d[1:]))
	}
	r.bounds = boundsOf(deps.Pack)
	if n := len(r.dims); n <= maxSharedSources {
		r.extracted = make([]map[string]Source, 1<<n)
		r.dimSets = make([][]string, 1<<n)
		for set := 1; set < len(r.extracted); set++ {
			m := map[string]Source{}
			for i, d := range r.dims {
				if set&(1<<i) != 0 {
					m[d] = SourceExtracted
					r.dimSets[set] = append(r.dimSets[set], d)
				}
			}
			r.extracted[set] = m
		}
	}
	return r, nil
}

// Name implements interceptors.Interceptor.
func (r *Interceptor) Name() string { return "context" }

// metaItem is one factgate.* metadata member.
type metaItem struct {
	key   string // the key as sent, unescaped ("factgate.Factions")
	name  string // the key without the prefix ("Factions")
	value string // raw JSON of the value
}

// OnRequest implements interceptors.RequestPhase.
func (r *Interceptor) OnRequest(_ context.Context, ex *interceptors.Exchange) error {
	c, meta, notes, err := r.resolve(ex)
	if err != nil {
		return err
	}
	if len(meta) > 0 {
		ex.Body = stripMetadata(ex.Body, meta)
	}
	Store(ex, c)
	ex.Trace.Do(func(t *interceptors.Trace) {
		t.KnowledgeSet = c.KnowledgeSet
		t.Scopes = c.Scopes
		t.Session = c.Session
		t.Notes = slices.Grow(t.Notes, 2+len(notes)) // one growth for all
		described, verdict := c.traceNotes()
		t.Notes = append(t.Notes, described, verdict)
		t.Notes = append(t.Notes, notes...)
	})
	return nil
}

// resolution is what the context stage allocates for one request, in one piece:
// the context it stores, the user heads the rules read (during resolve only),
// and room for the messages when the stage walks the body itself. Allocated
// apart, they cost three allocations a request.
type resolution struct {
	ctx   Context
	heads userHeads
	items [4]Message
}

// resolve reads the request context and returns it with the factgate.* metadata
// members (to strip) and remarks for the trace, which follow the verdict's reason
// (OnRequest writes that one: built only for a trace). The context's strings are
// copies: the body is edited afterwards.
func (r *Interceptor) resolve(ex *interceptors.Exchange) (*Context, []metaItem, []string, error) {
	res := &resolution{}
	c, meta, notes, err := r.resolveInto(res, ex)
	res.heads = userHeads{} // they alias the body and pooled buffers
	return c, meta, notes, err
}

// resolveInto is resolve, with res for what it allocates.
func (r *Interceptor) resolveInto(res *resolution, ex *interceptors.Exchange) (*Context, []metaItem, []string, error) {
	body := bytesView(ex.Body)
	// The proxy walked the client's body as it admitted the request, most often:
	// its scan spares walking the operation log again.
	req, ok := keptScan(ex, ex.Body)
	if !ok {
		req = scanRequest(body, res.items[:0], nil)
	}
	meta := factgateMetadataOf(req.metadata)
	// The heads are read in this phase only: their decoding goes in the
	// exchange's pooled buffers, and goes only as far as the rules read.
	heads := &res.heads
	heads.init(body, req.messages, r.bounds, ex)
	ext := knowledge.ExtractContextHeads(r.pack, heads)
	c := &res.ctx
	c.Players, c.scan = ext.Players, scanOf(ex.Body, req.messages, req.hasMessages)
	var notes []string

	// The knowledge set.
	if v, ok, err := headerValue(ex.Header, &knowledgeSetHeader); err != nil {
		return nil, nil, nil, err
	} else if ok {
		if err := r.checkSet(v, HeaderKnowledgeSet, "header "+HeaderKnowledgeSet); err != nil {
			return nil, nil, nil, err
		}
		c.KnowledgeSet, c.SetSource = v, SourceHeader
	}
	if c.SetSource == "" {
		if m, ok := findMeta(meta, "knowledge_set"); ok {
			v, ok := rawjson.StringValue(m.value)
			if !ok {
				return nil, nil, nil, badMetadata(m.key, "must be a string naming a knowledge set")
			}
			if v = strings.TrimSpace(v); v != "" {
				if err := r.checkSet(v, "metadata."+m.key, "metadata key "+m.key); err != nil {
					return nil, nil, nil, err
				}
				c.KnowledgeSet, c.SetSource = strings.Clone(v), SourceMetadata
			}
		}
	}
	if c.SetSource == "" && ex.Overrides.KnowledgeSet != "" {
		if r.pack.Set(ex.Overrides.KnowledgeSet) != nil {
			c.KnowledgeSet, c.SetSource = ex.Overrides.KnowledgeSet, SourceRoute
		} else {
			notes = append(notes, fmt.Sprintf("variant %s's knowledge set %q is not in pack %s; ignored", ex.Overrides.Variant, ex.Overrides.KnowledgeSet, r.pack.Name))
		}
	}
	if c.SetSource == "" && r.route.KnowledgeSet != "" {
		c.KnowledgeSet, c.SetSource = r.route.KnowledgeSet, SourceRoute
	}
	if c.SetSource == "" && ext.SetMatched {
		if r.pack.Set(ext.KnowledgeSet) != nil {
			c.KnowledgeSet, c.SetSource = ext.KnowledgeSet, SourceExtracted
		} else {
			notes = append(notes, fmt.Sprintf("the request text selects knowledge set %q, which pack %s does not have; using the default", ext.KnowledgeSet, r.pack.Name))
		}
	}
	if c.SetSource == "" {
		c.KnowledgeSet, c.SetSource = r.pack.DefaultSet, SourceDefault
		if !ext.SetMatched && ext.KnowledgeSet != "" && r.pack.Set(ext.KnowledgeSet) != nil {
			c.KnowledgeSet = ext.KnowledgeSet // the set rule's own default
		}
	}
	if c.KnowledgeSet != "" {
		c.Set, _ = r.lib.Set(c.KnowledgeSet)
	}

	// The scopes, per dimension. When every dimension's values are the extracted
	// ones (the common case: no headers, metadata or route scopes), the
	// extraction's own map — made for this request — is the context's, and the
	// sources are a map New made for that set of dimensions.
	extractedOnly := 0
	var srcBuf [maxSharedSources]Source
	srcs := srcBuf[:0] // the source of each of r.dims ("": none)
	for i, dim := range r.dims {
		var values []string
		var src Source
		if v, ok, err := headerList(ex.Header, &r.header[i]); err != nil {
			return nil, nil, nil, err
		} else if ok {
			values, src = v, SourceHeader
		} else if m, ok := findMeta(meta, dim); ok {
			v, ok := listValue(m.value)
			if !ok {
				return nil, nil, nil, badMetadata(m.key, "must be a comma-separated string or an array of strings")
			}
			if len(v) > 0 {
				values, src = v, SourceMetadata
			}
		}
		if src == "" {
			if v := r.route.Scopes[dim]; len(v) > 0 {
				values, src = v, SourceRoute
			} else if v := ext.Scopes[dim]; len(v) > 0 {
				values, src = v, SourceExtracted
			}
		}
		srcs = append(srcs, src)
		if src == "" {
			continue
		}
		if src == SourceExtracted && extractedOnly >= 0 {
			extractedOnly++
		} else {
			if extractedOnly > 0 || c.Scopes == nil {
				// Not the extraction's alone: a map of its own, with the
				// extracted dimensions chosen so far.
				c.Scopes = make(knowledge.Scopes, countSources(srcs))
				for j, s := range srcs[:i] {
					if s == SourceExtracted {
						c.Scopes[r.dims[j]] = ext.Scopes[r.dims[j]]
					}
				}
			}
			extractedOnly = -1
			c.Scopes[dim] = values
		}
		if c.Set != nil && (src == SourceHeader || src == SourceMetadata) {
			for _, v := range values {
				if !c.Set.HasScope(dim, v) {
					notes = append(notes, fmt.Sprintf("%s value %q (from the %s) is not in knowledge set %s; it selects no entries", dim, v, src, c.KnowledgeSet))
				}
			}
		}
	}

	if extractedOnly > 0 {
		if extractedOnly == len(ext.Scopes) {
			c.Scopes = ext.Scopes
		} else { // the extraction has dimensions the pack does not list
			c.Scopes = make(knowledge.Scopes, extractedOnly)
			for j, s := range srcs {
				if s != "" {
					c.Scopes[r.dims[j]] = ext.Scopes[r.dims[j]]
				}
			}
		}
	}
	c.ScopeSources = r.scopeSources(srcs, extractedOnly)
	if r.dimSets != nil {
		// The keys of c.Scopes are the dimensions with a source, whichever
		// branch above made it: sorted, as r.dims is.
		c.scopeDims = r.dimSets[sourceSet(srcs)]
	}

	// The session.
	if v, ok, err := headerValue(ex.Header, &sessionHeader); err != nil {
		return nil, nil, nil, err
	} else if ok {
		c.Session = v
	} else if m, ok := findMeta(meta, "session"); ok {
		v, ok := rawjson.StringValue(m.value)
		if !ok {
			return nil, nil, nil, badMetadata(m.key, "must be a string")
		}
		c.Session = strings.Clone(strings.TrimSpace(v))
	}
	// Judged once the session is known: a session's follow-up is about its facts.
	c.Applies = r.pack.Applies(knowledge.ApplyInput{
		Heads:    heads,
		JSONMode: jsonFormat(req.responseFormat),
		Session:  c.Session,
	})
	for _, m := range meta {
		if !strings.EqualFold(m.name, "knowledge_set") && !strings.EqualFold(m.name, "session") {
			if _, ok := findFold(r.dims, m.name); !ok {
				notes = append(notes, fmt.Sprintf("metadata key %s names no scope dimension of pack %s (have: %s); stripped and ignored", m.key, r.pack.Name, strings.Join(r.dims, ", ")))
			}
		}
	}
	return c, meta, notes, nil
}

// countSources returns how many of srcs are set.
func countSources(srcs []Source) int {
	n := 0
	for _, s := range srcs {
		if s != "" {
			n++
		}
	}
	return n
}

// sourceSet returns the set of dimensions srcs gives a source (bit i: srcs[i]).
func sourceSet(srcs []Source) int {
	set := 0
	for i, s := range srcs {
		if s != "" {
			set |= 1 << i
		}
	}
	return set
}

// scopeSources returns the ScopeSources of the sources srcs of r.dims (nil when
// none is set); extractedOnly > 0 says every one set is SourceExtracted, and
// then the map is the one New made for that set of dimensions, shared.
func (r *Interceptor) scopeSources(srcs []Source, extractedOnly int) map[string]Source {
	if extractedOnly > 0 && r.extracted != nil {
		return r.extracted[sourceSet(srcs)]
	}
	var m map[string]Source
	for i, s := range srcs {
		if s != "" {
			if m == nil {
				m = make(map[string]Source, countSources(srcs))
			}
			m[r.dims[i]] = s
		}
	}
	return m
}

// checkSet fails with a 400 when name is not a knowledge set of the route's pack.
func (r *Interceptor) checkSet(name, param, where string) error {
	if r.pack.Set(name) != nil {
		return nil
	}
	known := r.pack.SetNames()
	e := interceptors.Errorf(400, "invalid_request_error", "unknown_knowledge_set",
		"unknown knowledge set %q in %s: this route (pack %s) has %s", name, where, r.pack.Name, strings.Join(known, ", "))
	if len(known) == 0 {
		e.Message = fmt.Sprintf("unknown knowledge set %q in %s: this route's pack %s has no knowledge sets", name, where, r.pack.Name)
	}
	e.Param = param
	return e
}

// describe renders the context for the trace: where each item came from.
func (c *Context) describe() string {
	var buf [512]byte
	return string(c.appendDescription(buf[:0]))
}

// traceNotes returns the context stage's two notes for every request: the
// context (describe) and the pack's verdict ("context: " + its reason). They
// are built in a buffer on the stack and copied out once, as one string the two
// notes are parts of: a builder growing, a sorted copy of the keys and a second
// string cost nine allocations a request.
func (c *Context) traceNotes() (described, verdict string) {
	var buf [512]byte
	b := c.appendDescription(buf[:0])
	n := len(b)
	b = append(b, "context: "...)
	b = append(b, c.Applies.Reason...)
	s := string(b)
	return s[:n], s[n:]
}

// appendDescription appends describe's text to b, with the dimensions sorted in
// a small array.
func (c *Context) appendDescription(b []byte) []byte {
	b = append(b, "context: knowledge set "...)
	b = append(b, c.KnowledgeSet...)
	b = append(b, " ("...)
	b = append(b, c.SetSource...)
	b = append(b, ')')
	if c.Set != nil && c.Set.Version > 0 {
		b = append(b, " overlay v"...)
		b = strconv.AppendUint(b, c.Set.Version, 10)
	}
	dims := c.scopeDims
	if dims == nil && len(c.Scopes) > 0 { // a context the stage did not resolve
		var dimBuf [8]string
		dims = dimBuf[:0]
		for dim := range c.Scopes {
			dims = append(dims, dim)
		}
		slices.Sort(dims)
	}
	for _, dim := range dims {
		b = append(b, "; "...)
		b = append(b, dim...)
		b = append(b, ' ')
		for i, v := range c.Scopes[dim] {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, v...)
		}
		b = append(b, " ("...)
		b = append(b, c.ScopeSources[dim]...)
		b = append(b, ')')
	}
	if len(c.Players) > 0 {
		b = append(b, "; players"...)
		for i, p := range c.Players {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, ' ')
			b = append(b, p.Name...)
			b = append(b, " ("...)
			b = append(b, p.Scope...)
			b = append(b, ')')
		}
	}
	if c.Session != "" {
		b = append(b, "; session "...)
		b = append(b, c.Session...)
	}
	return b
}

// headerName is a request header the stage reads: its name, and the name as
// the key fasthttp reads without normalizing it first when the name is in the
// canonical form its normalizing gives ("X-Factgate-Session"): reading by it
// finds what Peek finds, without normalizing a copy of the name into the
// header's buffer — which grew, an allocation or two, in the header the proxy
// makes for every request.
type headerName struct {
	name string
	key  []byte // nil: the name is not canonical, read it with Peek
}

// The stage's fixed headers.
var (
	knowledgeSetHeader = newHeaderName(HeaderKnowledgeSet)
	sessionHeader      = newHeaderName(HeaderSession)
)

func newHeaderName(name string) headerName {
	n := headerName{name: name}
	if canonicalHeaderName(name) {
		n.key = []byte(name)
	}
	return n
}

// canonicalHeaderName reports whether fasthttp's normalizing leaves name as it
// is, whether or not a header normalizes: ASCII letters, digits and dashes,
// each letter upper case at the start and after a dash and lower case
// elsewhere.
func canonicalHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		upper := i == 0 || name[i-1] == '-'
		switch {
		case c == '-' || '0' <= c && c <= '9':
		case 'A' <= c && c <= 'Z':
			if !upper {
				return false
			}
		case 'a' <= c && c <= 'z':
			if upper {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// canonicalPeeker reads a header by a key in the canonical form, without
// normalizing it (fasthttp's RequestHeader.PeekCanonical).
type canonicalPeeker interface {
	PeekCanonical(key []byte) []byte
}

// peek returns the header's value in h, as h.Peek(n.name) does.
func (n *headerName) peek(h interceptors.HeaderReader) []byte {
	if n.key != nil {
		if c, ok := h.(canonicalPeeker); ok {
			return c.PeekCanonical(n.key)
		}
	}
	return h.Peek(n.name)
}

// headerValue reads one percent-encoded header value; ok is false when the header is
// absent or blank.
func headerValue(h interceptors.HeaderReader, n *headerName) (string, bool, error) {
	if h == nil {
		return "", false, nil
	}
	name := n.name
	raw := n.peek(h)
	if len(raw) == 0 {
		return "", false, nil
	}
	v, err := unescapeHeader(name, string(raw))
	if err != nil {
		return "", false, err
	}
	v = strings.TrimSpace(v)
	return v, v != "", nil
}

// headerList reads a comma-separated list of percent-encoded values (a comma inside
// a value is sent as %2C); ok is false when it holds no value.
func headerList(h interceptors.HeaderReader, n *headerName) ([]string, bool, error) {
	if h == nil {
		return nil, false, nil
	}
	name := n.name
	raw := n.peek(h)
	if len(raw) == 0 {
		return nil, false, nil
	}
	parts := strings.Split(string(raw), ",")
	for i, p := range parts {
		v, err := unescapeHeader(name, p)
		if err != nil {
			return nil, false, err
		}
		parts[i] = v
	}
	values := dedupe(parts)
	return values, len(values) > 0, nil
}

// unescapeHeader decodes a percent-encoded header value, which must decode to UTF-8.
func unescapeHeader(name, v string) (string, error) {
	d, err := url.PathUnescape(v)
	if err == nil && !utf8.ValidString(d) {
		err = fmt.Errorf("%q does not decode to UTF-8", v)
	}
	if err != nil {
		e := interceptors.Errorf(400, "invalid_request_error", "invalid_factgate_header",
			"header %s: the value is not valid percent-encoding (%v); send non-ASCII values as percent-escaped UTF-8, e.g. %%E7%%9B%%9F%%E5%%86%%9B for 盟军", name, err)
		e.Param = name
		return "", e
	}
	return d, nil
}

func badMetadata(key, want string) error {
	e := interceptors.Errorf(400, "invalid_request_error", "invalid_factgate_metadata", "metadata key %s %s", key, want)
	e.Param = "metadata." + key
	return e
}

// factgateMetadataOf returns the members of the body's metadata object (its raw
// JSON; "" when absent) whose keys start with "factgate." (any case), in order.
func factgateMetadataOf(metadata string) []metaItem {
	if metadata == "" {
		return nil
	}
	var out []metaItem
	rawjson.EachMember(metadata, func(v rawjson.Member) bool {
		key := rawjson.Key(v.Key)
		if len(key) >= len(MetadataPrefix) && strings.EqualFold(key[:len(MetadataPrefix)], MetadataPrefix) {
			key = strings.Clone(key)
			out = append(out, metaItem{key: key, name: key[len(MetadataPrefix):], value: v.Raw})
		}
		return true
	})
	return out
}

// findMeta returns the factgate.<name> member, name in any case; the last one
// when the key is repeated (as a JSON decoder would read it).
func findMeta(meta []metaItem, name string) (metaItem, bool) {
	for i := len(meta) - 1; i >= 0; i-- {
		if strings.EqualFold(meta[i].name, name) {
			return meta[i], true
		}
	}
	return metaItem{}, false
}

// listValue reads a scope list: a comma-separated string or an array of strings.
// The strings are copies.
func listValue(raw string) ([]string, bool) {
	if s, ok := rawjson.StringValue(raw); ok {
		return dedupe(strings.Split(strings.Clone(s), ",")), true
	}
	if raw == "" || raw[0] != '[' {
		return nil, false
	}
	var out []string
	valid := true
	rawjson.EachElement(raw, func(v rawjson.Value) bool {
		s, ok := rawjson.StringValue(v.Raw)
		if !ok {
			valid = false
			return false
		}
		out = append(out, strings.Clone(s))
		return true
	})
	if !valid {
		return nil, false
	}
	return dedupe(out), true
}

// stripMetadata removes the factgate.* members from the body's metadata object,
// and the metadata object itself when nothing else is left in it. Every other byte
// of the body is kept.
func stripMetadata(body []byte, meta []metaItem) []byte {
	for _, m := range meta {
		if b, err := sjson.DeleteBytes(body, "metadata."+gjson.Escape(m.key)); err == nil {
			body = b
		}
	}
	if md, ok := rawjson.Find(bytesView(body), "metadata"); ok {
		empty := true
		rawjson.EachMember(md.Raw, func(rawjson.Member) bool { empty = false; return false })
		if empty && strings.HasPrefix(md.Raw, "{") {
			if b, err := sjson.DeleteBytes(body, "metadata"); err == nil {
				body = b
			}
		}
	}
	return body
}

// Interface guard.
var _ interceptors.RequestPhase = (*Interceptor)(nil)
