package knowledge

import (
	"slices"
	"strings"
)

// The headings a notice lists its findings under, by what a finding says about
// the statement it is about. A pack declares each issue code's heading beside its
// message (MessageSpec.Notice, `notice:` in the pack's messages); a code without
// one gets DefaultNoticeHeading of its issue's severity.
const (
	// NoticeContradiction: the statement contradicts the facts; the finding says
	// what the facts show instead.
	NoticeContradiction = "contradiction"
	// NoticeCitation: the statement may be right, but the evidence it cites is not
	// in the facts; the finding names the citation and, when the facts know, what
	// they have at that time or for that unit.
	NoticeCitation = "citation"
	// NoticeWeak: the evidence is too weak for the level the statement is made at.
	NoticeWeak = "weak"
	// NoticeUnverified: the statement could not be checked (a finding outside any
	// claim, a claims block that could not be read, a check that could not run).
	NoticeUnverified = "unverified"
)

// NoticeHeadings are the notice headings, most serious first: the order a notice
// lists them in, and the order that decides the heading of a claim with findings
// under several.
var NoticeHeadings = []string{NoticeContradiction, NoticeCitation, NoticeWeak, NoticeUnverified}

// IsNoticeHeading reports whether h is one of NoticeHeadings.
func IsNoticeHeading(h string) bool { return slices.Contains(NoticeHeadings, h) }

// DefaultNoticeHeading is the heading of a code the pack declares none for, by
// its issue's severity name: a Contradiction goes under NoticeContradiction, a
// WeakEvidence under NoticeWeak, anything else — a Fatal issue, which stops the
// checks (no claims block, a broken one), and a Warning — under
// NoticeUnverified. A pack whose rule reports a Contradiction about a citation
// (not about the statement) declares `notice: citation` for it.
func DefaultNoticeHeading(severity string) string {
	switch severity {
	case "Contradiction":
		return NoticeContradiction
	case "WeakEvidence":
		return NoticeWeak
	}
	return NoticeUnverified
}

// NoticeHeading returns the heading the notice lists a finding of code (with an
// issue of that severity name) under: the pack's declaration for the code, else
// DefaultNoticeHeading(severity).
func (p *Pack) NoticeHeading(code, severity string) string {
	if p != nil {
		if m, ok := p.Messages[code]; ok && m.Notice != "" {
			return m.Notice
		}
	}
	return DefaultNoticeHeading(severity)
}

// noticeRank orders headings: 0 is the most serious; an unknown heading ranks as
// NoticeUnverified.
func noticeRank(h string) int {
	if i := slices.Index(NoticeHeadings, h); i >= 0 {
		return i
	}
	return len(NoticeHeadings) - 1
}

// mostSerious returns the most serious of the findings' headings
// (NoticeUnverified when there are none).
func mostSerious(findings []NoticeFinding) string {
	best := len(NoticeHeadings) - 1
	for _, f := range findings {
		best = min(best, noticeRank(f.Heading))
	}
	return NoticeHeadings[best]
}

// NoticeData is what a pack's notice template executes over: the problems that
// survived in one answer, grouped by heading.
//
// A claim is listed once, under the most serious heading of its findings, with
// every finding of its own (each with its heading, most serious first): a claim
// that contradicts the facts and also cites evidence the facts do not have is a
// false statement, and its wrong citation is said too. A claim is never listed
// under NoticeContradiction unless one of its own findings is declared so, so a
// true statement with a wrong citation is never called false.
type NoticeData struct {
	// Groups are the headings that have something, most serious first (see
	// NoticeHeadings).
	Groups []*NoticeGroup
	// Contradiction, Citation, Weak and Unverified are the groups by heading; nil
	// when the heading has nothing (so `{{with .Citation}}` tests it).
	Contradiction, Citation, Weak, Unverified *NoticeGroup
}

// NoticeGroup is what a notice lists under one heading.
type NoticeGroup struct {
	// Heading is one of NoticeHeadings.
	Heading string
	// Claims are the claims listed under the heading, in claim order.
	Claims []NoticeClaim
	// Findings are the findings under the heading outside any claim (a missing
	// claims block, a semantic check that rejected the answer or could not run),
	// most severe first.
	Findings []NoticeFinding
}

// NoticeClaim is one claim a notice names.
type NoticeClaim struct {
	// Path is the claim ("unitClaims[0]").
	Path string
	// Kind is "unit", "event" or "timeline" for the ra3 kinds, else the claim
	// kind as declared ("orderClaims").
	Kind string
	// Unit and Player are a unit claim's UnitId and player (as the answer states
	// them); Claim is the claimed asset, or an event or timeline claim's text.
	Unit, Player, Claim string
	// Level is the evidence level the answer states, LevelName its spelling in the
	// pack's language (the first of the pack's claims.levels spellings, else the
	// English name).
	Level, LevelName string
	// NewLevel and NewLevelName are the level in the claims block after the
	// downgrade; empty when it did not change.
	NewLevel, NewLevelName string
	// Alternatives are the candidates the claim lists after the downgrade.
	Alternatives []string
	// Removed are the evidence items removed because the facts contradict them.
	Removed []string
	// Heading is the heading the claim is listed under: the most serious of its
	// findings' headings.
	Heading string
	// Findings say what the facts say, by heading (most serious first), then
	// most severe first.
	Findings []NoticeFinding
}

// NoticeFinding is one issue as a notice names it.
type NoticeFinding struct {
	Code     string
	Severity string
	// Heading is the finding's heading (the pack's declaration for its code, or
	// the default for its severity).
	Heading string
	// Message is the message in the pack's language.
	Message string
}

// AddClaim lists c under the most serious heading of its findings (which it
// sorts by heading, keeping the order within one); a claim without findings is
// not listed.
func (d *NoticeData) AddClaim(c NoticeClaim) {
	if len(c.Findings) == 0 {
		return
	}
	slices.SortStableFunc(c.Findings, func(a, b NoticeFinding) int { return noticeRank(a.Heading) - noticeRank(b.Heading) })
	c.Heading = mostSerious(c.Findings)
	g := d.group(c.Heading)
	g.Claims = append(g.Claims, c)
}

// AddFinding lists a finding outside any claim under its heading.
func (d *NoticeData) AddFinding(f NoticeFinding) {
	g := d.group(NoticeHeadings[noticeRank(f.Heading)])
	g.Findings = append(g.Findings, f)
}

// Empty reports a notice with nothing to say.
func (d *NoticeData) Empty() bool { return len(d.Groups) == 0 }

// group returns the group of heading h (one of NoticeHeadings; any other is
// NoticeUnverified), adding it.
func (d *NoticeData) group(h string) *NoticeGroup {
	var slot **NoticeGroup
	switch h {
	case NoticeContradiction:
		slot = &d.Contradiction
	case NoticeCitation:
		slot = &d.Citation
	case NoticeWeak:
		slot = &d.Weak
	default:
		slot = &d.Unverified
	}
	if *slot == nil {
		*slot = &NoticeGroup{Heading: h}
		d.Groups = append(d.Groups, *slot)
		slices.SortFunc(d.Groups, func(a, b *NoticeGroup) int { return noticeRank(a.Heading) - noticeRank(b.Heading) })
	}
	return *slot
}

// SampleNoticeData is the data a notice template is checked with at load: a
// claim under every heading and a finding outside the claims.
func SampleNoticeData() NoticeData {
	var d NoticeData
	for _, h := range NoticeHeadings {
		d.AddClaim(sampleNoticeClaim(h))
	}
	d.AddFinding(NoticeFinding{Code: "sample", Severity: "Warning", Heading: NoticeUnverified, Message: "m"})
	return d
}

func sampleNoticeClaim(heading string) NoticeClaim {
	return NoticeClaim{Path: "unitClaims[0]", Kind: "unit", Unit: "1", Player: "P", Claim: "A", Level: "confirmed", LevelName: "confirmed",
		NewLevel: "uncertain", NewLevelName: "uncertain", Alternatives: []string{"B"}, Removed: []string{"e"},
		Findings: []NoticeFinding{{Code: "sample", Severity: "Contradiction", Heading: heading, Message: "m"}}}
}

// checkNoticeTemplate renders the sample, and a notice with a single claim or a
// single finding outside the claims under each heading: a template that renders
// nothing for one of them would hide what survived. It returns the first problem.
func checkNoticeTemplate(render func(NoticeData) (string, error)) string {
	if out, err := render(SampleNoticeData()); err != nil {
		return err.Error()
	} else if strings.TrimSpace(out) == "" {
		return "the notice renders empty for a sample answer with a claim under every heading and a finding outside the claims"
	}
	for _, h := range NoticeHeadings {
		var claim, finding NoticeData
		claim.AddClaim(sampleNoticeClaim(h))
		finding.AddFinding(NoticeFinding{Code: "sample", Severity: "Warning", Heading: h, Message: "m"})
		for _, c := range []struct {
			what string
			data NoticeData
		}{{"a claim", claim}, {"a finding outside the claims", finding}} {
			if out, err := render(c.data); err != nil {
				return err.Error()
			} else if strings.TrimSpace(out) == "" {
				return "the notice renders empty for " + c.what + " under the " + h + " heading"
			}
		}
	}
	return ""
}
