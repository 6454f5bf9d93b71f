// Package reqcontext resolves a chat completion's request context — which
// knowledge set applies, which scope values (factions in player order, the map),
// which players, which session — before anything else reads the request. It is
// the "context" stage of a route's chain (Stage; the route's context block); it
// runs on every route with a pack.
//
// Each item is resolved on its own, first hit wins (PRODUCT.md §5):
//
//  1. headers: X-Factgate-Knowledge-Set, X-Factgate-Scope-<Dimension> (dimension in
//     any case; values percent-encoded and comma-separated), X-Factgate-Session;
//  2. body metadata: factgate.knowledge_set, factgate.<dimension> (a comma-separated
//     string or an array of strings), factgate.session;
//  3. the route: its context block (knowledge_set, scopes) — an A/B variant's
//     knowledge set replaces the route's at this level;
//  4. extraction from the user messages by the pack's declarative header rules;
//  5. defaults: the set rule's default, then the pack's default_set.
//
// Players come from extraction only. Every factgate.* metadata key is stripped from
// the request before it is forwarded.
package reqcontext

import (
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
	"unsafe"
)

// Source says where a resolved item came from.
type Source string

// The sources, in precedence order.
const (
	SourceHeader    Source = "header"
	SourceMetadata  Source = "metadata"
	SourceRoute     Source = "route"
	SourceExtracted Source = "extracted"
	SourceDefault   Source = "default"
)

// The request headers the context stage reads. Values are percent-encoded (so that
// non-ASCII faction names travel in headers); scope values are comma-separated.
const (
	HeaderKnowledgeSet = "X-Factgate-Knowledge-Set"
	HeaderScopePrefix  = "X-Factgate-Scope-" // + the dimension, in any case
	HeaderSession      = "X-Factgate-Session"
)

// The body metadata keys the context stage reads; every key with MetadataPrefix is
// removed before the request is forwarded.
const (
	MetadataPrefix       = "factgate."
	MetadataKnowledgeSet = MetadataPrefix + "knowledge_set"
	MetadataSession      = MetadataPrefix + "session"
	// A scope dimension's key is MetadataPrefix + the dimension ("factgate.factions").
)

// Context is the resolved request context of one chat completion. It is read-only
// once stored in the exchange: later interceptors share it and must not modify its
// maps or slices.
type Context struct {
	// KnowledgeSet names the set that applies ("ra3-corona"); "" only when the
	// route's pack has no knowledge sets.
	KnowledgeSet string
	// SetSource says which step chose the set.
	SetSource Source
	// Set is the effective set (built-in plus the user overlay) as it was when the
	// request was resolved, so that every interceptor of one request sees the same
	// overlay version. Nil when KnowledgeSet is "".
	Set *knowledge.Set
	// Scopes are the scope values per dimension, in request order (factions in player
	// order). Nil or empty selects only the set's global entries.
	Scopes knowledge.Scopes
	// ScopeSources says, per dimension in Scopes, which step chose its values.
	ScopeSources map[string]Source
	// Players are the players the pack's rules read from the request text, in order,
	// each with its scope value (faction). Nil when the text names none.
	Players []knowledge.Player
	// Session groups the segments of one analysis sent as several requests; "" when
	// the client sent none.
	Session string
	// Applies is the pack's verdict on the request (knowledge.ApplyRules): whether
	// the pack is about it and its contract applies. Read it with Applies.
	Applies knowledge.Applicability

	// scan is the messages array the context stage found in the body it read,
	// for the later stages that read the same bytes (Messages).
	scan scannedMessages
	// scopeDims are the keys of Scopes, sorted, when the stage knows them
	// (describe); nil: describe sorts them itself. Shared: not modified.
	scopeDims []string
}

// scannedMessages is a messages scan of one body, named by its first byte and
// length. Bodies are never edited in place (Exchange.Body), and the pointer
// keeps the scanned body alive, so no other body can have the same address and
// length while the scan is held: the same slice means the same bytes.
//
// Identity key: a slice's pointer and length, which pin its array (docs/architecture.md, Lifetimes).
type scannedMessages struct {
	body  *byte
	n     int
	list  MessageList
	found bool
}

// scanOf records the scan of body (nothing for an empty body, which has no
// address to name it by).
func scanOf(body []byte, list MessageList, found bool) scannedMessages {
	if len(body) == 0 {
		return scannedMessages{}
	}
	return scannedMessages{body: unsafe.SliceData(body), n: len(body), list: list, found: found}
}

// ScannedMessages returns FindMessages(body) when the context stage already
// found it — body is the very slice the stage read (the client's body, when no
// earlier stage replaced it) — so that later stages do not walk a long
// operation log again; known is false when it did not (another body, or no
// context stage), and the caller scans itself. The list is shared: its Items
// must not be modified.
func ScannedMessages(ex *interceptors.Exchange, body []byte) (list MessageList, found, known bool) {
	c, ok := FromExchange(ex)
	if !ok || len(body) == 0 || c.scan.body != unsafe.SliceData(body) || c.scan.n != len(body) {
		return MessageList{}, false, false
	}
	return c.scan.list, c.scan.found, true
}

// Messages is FindMessages(body), from the context stage's scan when it read
// the same body (ScannedMessages). The list is shared: its Items must not be
// modified.
func Messages(ex *interceptors.Exchange, body []byte) (MessageList, bool) {
	if list, found, known := ScannedMessages(ex, body); known {
		return list, found
	}
	return FindMessages(body)
}

type contextKey struct{}

// FromExchange returns the request context the context stage stored in ex; false
// when the route has no context stage (no pack) or it has not run yet.
func FromExchange(ex *interceptors.Exchange) (*Context, bool) {
	c, ok := ex.Value(contextKey{}).(*Context)
	return c, ok && c != nil
}

// Store puts c into ex as the request context, for FromExchange. The context stage
// calls it; tests and offline tools (factgate check) use it to run later
// interceptors without the stage.
func Store(ex *interceptors.Exchange, c *Context) { ex.SetValue(contextKey{}, c) }
