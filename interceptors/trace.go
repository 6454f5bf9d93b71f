package interceptors

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/factgate/factgate/configs/units"
)

// Trace records what factgate did for one request: every attempt with its issues,
// the revision requests' sizes, timings and tokens. It is safe for concurrent use.
// GET /factgate/v1/traces/{id} returns it as JSON.
type Trace struct {
	mu sync.Mutex

	ID string `json:"id"`
	// TraceParent is the W3C traceparent of the request's OpenTelemetry server
	// span ("00-<trace id>-<span id>-<flags>") when tracing is on: the trace and
	// span an operator's tracing backend shows for this request. Its trace id is
	// ID, unless the client sent a traceparent of its own (see
	// proxy/telemetry.Request.Adopt).
	TraceParent string    `json:"traceparent,omitempty"`
	Route       string    `json:"route"`
	Variant     string    `json:"variant,omitempty"`
	Started     time.Time `json:"started"`
	// Owner names who may read the trace through the API: "key:<name>" for the
	// client key that made the request, "credential:<hash>" for a passthrough
	// client's credential, "" for nobody but an admin key. The proxy sets it.
	Owner string `json:"owner,omitempty"`
	// KnowledgeSet and Scopes are the resolved request context.
	KnowledgeSet string              `json:"knowledge_set,omitempty"`
	Scopes       map[string][]string `json:"scopes,omitempty"`
	Session      string              `json:"session,omitempty"`
	// FactKey is the cache key of the fact index the answer was checked against.
	FactKey string `json:"fact_key,omitempty"`
	// Attempts are the draft and every revision or repair, in order; each names
	// its choice (an answer with several choices has a draft per choice).
	Attempts []Attempt `json:"attempts,omitempty"`
	// Calls are the hidden calls that produce no answer — the LLM-backed
	// validators' judge calls — in the order they ended.
	Calls []Call `json:"calls,omitempty"`
	// Upstream names the upstream that served the first answer (the draft): the
	// route's first, or a fallback when that one was exhausted.
	Upstream string `json:"upstream,omitempty"`
	// UpstreamAttempts are every try of every upstream call of the request, the
	// draft's and the hidden calls', in order: retries and fallbacks included.
	UpstreamAttempts []UpstreamAttempt `json:"upstream_attempts,omitempty"`
	// Final says which attempt was returned and how ("accepted", "resolved",
	// "downgraded", "failed"). With several validated choices it is the choice
	// whose outcome says most (failed, downgraded, improved, resolved, accepted, in
	// that order), and Counts covers every choice.
	Final *FinalOutcome `json:"final,omitempty"`
	// Choices are the outcome of every validated choice, when the answer has more
	// than one choice.
	Choices []FinalOutcome `json:"choices,omitempty"`
	// Downgrades are the deterministic edits made to the returned claims.
	Downgrades []Downgrade `json:"downgrades,omitempty"`
	// Notice is what the reader was told about the problems that survived in the
	// answer (nil when none did): with several choices, the notice of the first
	// choice that has one; each choice's own is in Choices.
	Notice *Notice `json:"notice,omitempty"`
	// ValidationIncomplete is set when a validator could not run (fail-open).
	ValidationIncomplete bool `json:"validation_incomplete,omitempty"`
	// Timings are named durations ("facts", "upstream", "validate").
	Timings map[string]units.Millis `json:"timings,omitempty"`
	// Usage is the sum over every upstream call.
	Usage Usage `json:"usage"`
	// Notes are human-readable remarks (a fail-open failure, a skipped step).
	Notes []string `json:"notes,omitempty"`
	// ClientKey names the client key that made the request ("" in auth mode
	// passthrough): the trace's owner.
	ClientKey string `json:"client_key,omitempty"`
	// Request is the client's request as the console shows it; nil when it is not
	// kept (console off, or traces.content false).
	Request *TraceRequest `json:"request,omitempty"`

	// The first notes, attempt and upstream try are kept in the trace's own
	// allocation: NewTrace starts Notes, Attempts and UpstreamAttempts (empty)
	// on them, so that a request that makes no more grows none of them (a
	// validated request makes about four notes, one attempt, one try).
	noteRoom     [traceNoteRoom]string
	attemptRoom  [1]Attempt
	upstreamRoom [1]UpstreamAttempt
}

// traceNoteRoom is how many notes a trace from NewTrace holds before Notes grows.
const traceNoteRoom = 4

// TraceRequest is the client's request as received, each message's text cut at a
// bound so that an operation log does not make every trace large.
type TraceRequest struct {
	Model    string         `json:"model,omitempty"`
	Stream   bool           `json:"stream,omitempty"`
	Messages []TraceMessage `json:"messages"`
}

// TraceMessage is one message of the client's request.
type TraceMessage struct {
	Role string `json:"role"`
	// Content is the message's text (text parts joined by a newline), cut at the
	// bound when Bytes is larger than its length.
	Content string `json:"content"`
	// Bytes is the text's full length in bytes.
	Bytes int `json:"bytes"`
	// Truncated reports that Content is a prefix of the text.
	Truncated bool `json:"truncated,omitempty"`
}

// Attempt is one answer the model produced for the request.
type Attempt struct {
	// Kind is "draft", "revision" or "repair".
	Kind string `json:"kind"`
	// Choice is the index of the choice the attempt answers (0 unless the client
	// asked for several).
	Choice int `json:"choice"`
	// Issues are the issues found in the attempt.
	Issues []Issue `json:"issues"`
	// Counts is the attempt's issue count by severity ("C1,W2").
	Counts string `json:"counts"`
	// RequestBytes is the size of the request that produced the attempt.
	RequestBytes int `json:"request_bytes"`
	// Duration is the upstream call's duration.
	Duration units.Millis `json:"duration"`
	Usage    Usage        `json:"usage"`
	// Error is why the call failed, when it did.
	Error string `json:"error,omitempty"`
	// Leaked reports that the attempt mentioned the revision.
	Leaked bool `json:"leaked,omitempty"`
	// Content is the attempt's answer text.
	Content string `json:"content,omitempty"`
}

// The attempt kinds recorded in the trace (Attempt.Kind).
const (
	KindDraft    = "draft"
	KindRevision = "revision"
	KindRepair   = "repair"
)

// The final outcomes the hidden revision records in the trace (Final.Outcome),
// counted in factgate_revisions_total and by A/B experiments.
const (
	// OutcomeAccepted: the draft had no issue at or above the threshold; no hidden
	// call was made and the draft was returned as it was (claims block aside).
	OutcomeAccepted = "accepted"
	// OutcomeResolved: a revision or repair left no issue at or above the threshold.
	OutcomeResolved = "resolved"
	// OutcomeImproved: the returned revision is better than the draft by the order
	// the delivered attempt is chosen by (revise.Rank), but issues remain; its
	// flagged claims were downgraded.
	OutcomeImproved = "improved"
	// OutcomeDowngraded: no attempt beat the draft (or revisions are off); the
	// draft's flagged claims were downgraded.
	OutcomeDowngraded = "downgraded"
	// OutcomeFailed: a hidden call failed (timeout, non-2xx, malformed or empty
	// answer); the best attempt so far was returned, downgraded.
	OutcomeFailed = "failed"
)

// Call is one hidden call that produced no answer: a judge call of an LLM-backed
// validator.
type Call struct {
	// Kind says what the call was for ("judge").
	Kind string `json:"kind"`
	// Validator names the validator that made it ("semantic/combat").
	Validator string `json:"validator"`
	// Result is how the call ended: "ok" (a valid verdict), "failed" (no valid
	// verdict: a transport error, a timeout, a non-2xx status, malformed output),
	// "cancelled" (the client went away) or "budget_exhausted" (the revision
	// budget ran out during the call).
	Result   string       `json:"result"`
	Duration units.Millis `json:"duration"`
	Usage    Usage        `json:"usage"`
	// Error is why the call failed, when it did.
	Error string `json:"error,omitempty"`
}

// UpstreamAttempt is one try of an upstream call.
type UpstreamAttempt struct {
	// Upstream names the upstream tried.
	Upstream string `json:"upstream"`
	// Key names the provider key used by its environment variable ("" when the
	// client's own credentials went, or none). Never the key itself.
	Key string `json:"key,omitempty"`
	// Status is the upstream's HTTP status (0 when none came).
	Status int `json:"status,omitempty"`
	// Outcome is how the try ended: ok, client_error, unauthorized,
	// rate_limited, server_error, connect_error, timeout, failed, saturated,
	// cancelled — or circuit_open and keys_cooling for an upstream skipped
	// without a call.
	Outcome string `json:"outcome"`
	// Error is the transport failure, when there was one.
	Error string `json:"error,omitempty"`
	// Wait is how long the proxy waited before this try (backoff, the provider's
	// Retry-After, a key's cooldown).
	Wait units.Millis `json:"wait,omitempty"`
	// Duration is how long the try took, until the answer's headers (the whole
	// answer when it is read at once).
	Duration units.Millis `json:"duration"`
}

// FinalOutcome says which attempt was returned.
type FinalOutcome struct {
	// Choice is the index of the choice.
	Choice  int    `json:"choice"`
	Attempt int    `json:"attempt"`
	Outcome string `json:"outcome"`
	// Counts are the returned attempt's issues as validated; Delivered those of
	// the answer as sent, after the downgrade ("C1,E2", "0").
	Counts    string `json:"counts"`
	Delivered string `json:"delivered,omitempty"`
	// Notice is the choice's notice (nil when nothing survived).
	Notice *Notice `json:"notice,omitempty"`
}

// Downgrade is one deterministic edit of a claim: a flagged claim of the returned
// answer made honest in the claims block (its prose is never edited).
type Downgrade struct {
	// Choice is the index of the choice whose claim was edited.
	Choice       int      `json:"choice"`
	Path         string   `json:"path"`
	From         string   `json:"from"`
	To           string   `json:"to"`
	Alternatives []string `json:"alternatives,omitempty"`
	// RemovedEvidence are the evidence items the facts contradict, removed.
	RemovedEvidence []string `json:"removed_evidence,omitempty"`
	// NeedsConfirmation are the items added to the claim's needsConfirmation.
	NeedsConfirmation []string `json:"needs_confirmation,omitempty"`
	// Player is the player the claim now names, when the edit changed it.
	Player string `json:"player,omitempty"`
	// Removed says the claim was removed from the claims block (an issue whose
	// recommendation is to drop it: unit.not_observed, asset.unknown); From and To
	// are then its level as stated. Path is the claim's path in the returned
	// answer.
	Removed bool `json:"removed,omitempty"`
}

// Notice is the note to the reader naming what survived in an answer: the claims
// the facts contradict or do not support, and what the facts say.
type Notice struct {
	// Choice is the index of the choice the notice belongs to.
	Choice int `json:"choice"`
	// Mode is how it reached the client: "append" (in the content), "header"
	// (X-Factgate-Notice) or "none" (not sent; recorded here only).
	Mode string `json:"mode"`
	// Text is the notice as rendered from the pack's notice template.
	Text string `json:"text"`
	// Issues are the issues it names (of the returned attempt and of the answer
	// as delivered), each path that of its claim in the returned attempt (the
	// downgrade may have removed claims before it).
	Issues []NoticeIssue `json:"issues"`
}

// NoticeIssue is one issue a notice names.
type NoticeIssue struct {
	Code     string   `json:"code"`
	Severity Severity `json:"severity"`
	Path     string   `json:"path"`
	// Heading is the notice heading the issue is named under (contradiction,
	// citation, weak or unverified; see knowledge.NoticeHeadings); a claim's
	// entry stands under the most serious heading of its issues.
	Heading string `json:"heading"`
}

// NewTrace starts a trace with a random id. Its Notes, Attempts and
// UpstreamAttempts are empty, not nil, with room for the first few in the trace
// itself (which encodes the same: each is omitted when empty).
func NewTrace(route string) *Trace {
	t := &Trace{ID: NewTraceID(), Route: route, Started: time.Now()}
	t.Notes = t.noteRoom[:0]
	t.Attempts = t.attemptRoom[:0]
	t.UpstreamAttempts = t.upstreamRoom[:0]
	return t
}

// NewTraceID returns a random 16-byte hex id.
func NewTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Do runs f with the trace locked, for edits of several fields at once.
func (t *Trace) Do(f func(t *Trace)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t)
}

// Note appends a remark.
func (t *Trace) Note(s string) {
	t.Do(func(t *Trace) { t.Notes = append(t.Notes, s) })
}

// Time records a named duration.
func (t *Trace) Time(name string, d time.Duration) {
	t.Do(func(t *Trace) {
		if t.Timings == nil {
			t.Timings = make(map[string]units.Millis, 4)
		}
		t.Timings[name] += units.Millis(d)
	})
}

// AddAttempt appends an attempt and returns its index.
func (t *Trace) AddAttempt(a Attempt) int {
	n := -1
	t.Do(func(t *Trace) {
		t.Attempts = append(t.Attempts, a)
		n = len(t.Attempts) - 1
	})
	return n
}

// AddUpstreamAttempt appends one try of an upstream call.
func (t *Trace) AddUpstreamAttempt(a UpstreamAttempt) {
	t.Do(func(t *Trace) { t.UpstreamAttempts = append(t.UpstreamAttempts, a) })
}

// AddCall appends a hidden call.
func (t *Trace) AddCall(c Call) {
	t.Do(func(t *Trace) { t.Calls = append(t.Calls, c) })
}
