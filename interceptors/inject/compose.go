package inject

import (
	"strings"

	"github.com/factgate/factgate/knowledge"
)

// Parts are the pieces of an injected system prompt, in the order they appear.
type Parts struct {
	// Knowledge is the rendered knowledge for the request's set and scopes, or the
	// custom prompt. Empty: none.
	Knowledge string
	// Contract is the pack's contract text (PackContract); empty when it is not
	// injected.
	Contract string
	// AdditionalRules are the route's (or the A/B variant's) additional rules.
	AdditionalRules string
	// ClientHeading and ClientSystem are the merge policy's part: the client's own
	// system message texts, in order, under the heading. Empty texts are skipped;
	// nil ClientSystem adds nothing.
	ClientHeading string
	ClientSystem  []string
}

// Compose returns the system prompt factgate injects: the knowledge, the contract
// and the additional rules — each without trailing white space, blank ones
// skipped — separated by a blank line; then, when the client's system messages are
// merged, the heading and each of them verbatim, separated by blank lines. The
// result has no trailing newline. `factgate knowledge render` prints exactly this;
// the interceptor builds the same bytes, JSON-encoded, without decoding the
// client's messages.
func Compose(p Parts) string {
	var b strings.Builder
	for _, s := range [...]string{p.Knowledge, p.Contract, p.AdditionalRules} {
		s = strings.TrimRight(s, " \t\r\n")
		if strings.TrimSpace(s) == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(s)
	}
	first := true
	for _, s := range p.ClientSystem {
		if s == "" {
			continue
		}
		if first {
			b.WriteString(mergeLead(b.Len() > 0, p.ClientHeading))
			first = false
		} else {
			b.WriteString("\n\n")
		}
		b.WriteString(s)
	}
	return b.String()
}

// mergeLead is what precedes the first merged client text: a blank line after our
// own prompt, the heading and a blank line.
func mergeLead(afterOurs bool, heading string) string {
	var lead string
	if afterOurs {
		lead = "\n\n"
	}
	if heading != "" {
		lead += heading + "\n\n"
	}
	return lead
}

// PackContract returns the contract text a pack injects: its claims contract, or —
// for a pack with an answer shape and no claims — its answer contract; "" when it
// has neither (or p is nil).
func PackContract(p *knowledge.Pack) string {
	switch {
	case p == nil:
		return ""
	case p.Claims != nil && p.Claims.ContractText != "":
		return p.Claims.ContractText
	case p.Answer != nil:
		return p.Answer.ContractText
	}
	return ""
}
