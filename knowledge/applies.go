package knowledge

import (
	"regexp"
	"strings"
)

// ApplyRules say which requests a pack is about — which requests its contract
// applies to. Only those get the contract (the claims contract, or the answer
// contract of a pack with an answer shape), validation and the hidden revision;
// under the route's inject.when "facts" (the default) only those get the pack's
// knowledge too. Any other request on the route — a greeting, a tool step of
// another conversation, a JSON-mode call — is forwarded with at most the knowledge
// the route configures, and its answer passes as the upstream sent it.
//
// A request is one the pack is about when any condition that is set holds. The
// text conditions read the first Context.MaxLines lines within Context.MaxBytes of
// each user message (the context rules' bounds), one line at a time.
type ApplyRules struct {
	// Facts: a line of a user message is an operation (one of facts.ops matches
	// it): the request carries the facts answers are checked against.
	Facts bool `yaml:"facts"`
	// Marker: the client's own messages (system, developer or user) contain the
	// claims marker: the app's prompt asks for the claims block itself.
	Marker bool `yaml:"marker"`
	// UserLine is a regular expression matched against single lines of the user
	// messages (the RA3 log's header lines, a D&D transcript's speaker lines).
	// Empty: no such condition.
	UserLine string `yaml:"user_line"`
	// JSONMode lets a JSON-mode request (response_format json_object or
	// json_schema) get the contract: true for a pack whose answer is the JSON its
	// contract describes. False (the default): such a request never does — its
	// answer must be exactly the JSON the app asked for, with nothing appended — and
	// it gets at most the knowledge.
	JSONMode bool `yaml:"json_mode"`
	// Records: a message of a role the pack's record rules read (facts.records)
	// carries their JSON — its text names the first key of a rule's path
	// ("orders" for path orders; any JSON object for a rule without a path). A
	// tool result with the customer's orders makes the request one the pack is
	// about.
	Records bool `yaml:"records"`
	// Session: the request names a session (X-Factgate-Session or
	// metadata.factgate.session): its facts are the session's segments, sent in
	// earlier requests, so a follow-up without a log of its own ("and the final
	// summary?") is still checked against them.
	Session bool `yaml:"session"`

	UserLineRe *regexp.Regexp `yaml:"-"`

	// userLineStart and opStart skip lines that cannot match (nil: no prefilter).
	userLineStart, opStart *lineStart
	// userLineSeen and opSeen remember lines the user_line rule, or an operation
	// rule, matched (nil: none). A conversation sends its log again on every
	// turn, and the rules stop at the first line that matches, so a request costs
	// one lookup instead of a regex run. Only matching lines are remembered: at
	// most one a request, whatever the text.
	userLineSeen, opSeen *lineMemo[struct{}]
}

// ApplyInput is what a request shows the pack's apply rules.
type ApplyInput struct {
	// UserTexts are the texts of the user messages (their first bytes suffice:
	// the rules read no further than the context rules' bounds).
	UserTexts []string
	// Heads, when not nil, are read instead of UserTexts: the same texts, whose
	// lines the caller produces as the rules ask for them (TextHeads).
	Heads TextHeads
	// ClientMentions reports whether the client's own messages contain s (the
	// claims marker); called only when a rule needs it. Nil: the Heads' own
	// ClientMentions when they are a ClientMentioner (a caller that made its
	// heads for the request spares a function made for it), else they do not.
	ClientMentions func(s string) bool
	// JSONMode: the request asks for JSON (response_format json_object or
	// json_schema).
	JSONMode bool
	// Session is the request's session id ("" when it names none).
	Session string
}

// RoleMentioner is TextHeads that can also tell whether the request's messages
// of some roles contain a string (ApplyRules.Records).
type RoleMentioner interface {
	RoleMentions(roles []string, s string) bool
}

// ClientMentioner is TextHeads that can also tell whether the client's own
// messages — system, developer and user — contain a string (ApplyInput's
// ClientMentions).
type ClientMentioner interface {
	ClientMentions(s string) bool
}

// clientMentions is in.ClientMentions, or the heads' (ClientMentioner); false
// when there is neither.
func (in *ApplyInput) clientMentions(s string) bool {
	if in.ClientMentions != nil {
		return in.ClientMentions(s)
	}
	if m, ok := in.Heads.(ClientMentioner); ok {
		return m.ClientMentions(s)
	}
	return false
}

// Applicability is a pack's verdict on one request.
type Applicability struct {
	// Domain: the request is one the pack is about; its knowledge is injected
	// under inject.when "facts".
	Domain bool
	// Contract: the pack's contract applies: it is injected (inject.contract auto,
	// on a validating route) and the answer is validated and, when flagged,
	// revised. Never without Domain.
	Contract bool
	// Reason says why, for the trace.
	Reason string
}

// Applies judges whether the pack is about the request in (see ApplyRules). A pack
// without apply rules is about every request; without JSONMode in its rules, a
// JSON-mode request never gets the contract.
func (p *Pack) Applies(in ApplyInput) Applicability {
	var a Applicability
	rules := p.ApplyRules
	texts, heads := in.UserTexts, in.Heads
	if heads != nil {
		texts = nil
	}
	switch {
	case rules == nil:
		a.Domain, a.Reason = true, "pack "+p.Name+" applies to every request"
	case rules.Facts && p.Facts != nil && p.hasOperationLine(texts, heads, rules.opStart, rules.opSeen):
		a.Domain, a.Reason = true, "a user message holds an operation the pack's fact rules read"
	case rules.UserLineRe != nil && p.anyLine(texts, heads, func(line string) bool {
		return rules.userLineStart.admits(line) && remembered(rules.userLineSeen, line, rules.UserLineRe.MatchString)
	}):
		a.Domain, a.Reason = true, "a user message has a line the pack's user_line rule matches"
	case rules.Records && p.Facts != nil && p.carriesRecords(in):
		a.Domain, a.Reason = true, "a message carries the JSON the pack's record rules read"
	case rules.Marker && p.Claims != nil && in.clientMentions(p.Claims.Marker):
		a.Domain, a.Reason = true, "the client's own prompt asks for the claims block ("+p.Claims.Marker+")"
	case rules.Session && in.Session != "":
		a.Domain, a.Reason = true, "the request continues session "+in.Session+", whose segments are its facts"
	default:
		a.Reason = "not a request pack " + p.Name + " is about (no rule of its applies block holds)"
		return a
	}
	a.Contract = true
	if in.JSONMode && (rules == nil || !rules.JSONMode) {
		a.Contract = false
		a.Reason += "; JSON mode: no contract, nothing appended to the answer"
	}
	return a
}

// hasOperationLine reports whether a line of heads (nil: texts) is an
// operation; start, when not nil, skips lines no operation rule can match, and
// seen remembers operations.
func (p *Pack) hasOperationLine(texts []string, heads TextHeads, start *lineStart, seen *lineMemo[struct{}]) bool {
	return p.anyLine(texts, heads, func(line string) bool {
		return start.admits(line) && remembered(seen, line, p.isOperation)
	})
}

// isOperation reports whether an operation rule matches line.
func (p *Pack) isOperation(line string) bool {
	ops := p.Facts.Ops
	for i := range ops {
		if re := ops[i].Re; re != nil && re.MatchString(line) {
			return true
		}
	}
	return false
}

// remembered reports whether match holds for line, asking seen first, and
// remembers line in seen when it does.
func remembered(seen *lineMemo[struct{}], line string, match func(string) bool) bool {
	if _, ok := seen.get(line); ok {
		return true
	}
	if !match(line) {
		return false
	}
	seen.put(line, struct{}{})
	return true
}

// anyLine reports whether match holds for a line of heads (nil: texts), within
// the context rules' bounds.
func (p *Pack) anyLine(texts []string, heads TextHeads, match func(string) bool) bool {
	scan := newLineScan(p, texts, heads)
	for {
		line, ok := scan.next()
		if !ok {
			return false
		}
		if match(line) {
			return true
		}
	}
}

// carriesRecords reports whether a message of a record rule's roles names the
// first key of the rule's path (as JSON writes it: "orders"), or has a "{" for
// a rule without a path. The content is searched as written, so a tool result
// whose content is a JSON string holding JSON is found too (\"orders\").
func (p *Pack) carriesRecords(in ApplyInput) bool {
	m, ok := in.Heads.(RoleMentioner)
	if !ok {
		return false
	}
	for i := range p.Facts.Records {
		r := &p.Facts.Records[i]
		first, _, _ := strings.Cut(r.Path, ".")
		if first == "" || strings.ContainsAny(first, "*?#|@\\") {
			if m.RoleMentions(r.Roles(), "{") {
				return true
			}
			continue
		}
		if m.RoleMentions(r.Roles(), `"`+first+`"`) {
			return true
		}
	}
	return false
}
