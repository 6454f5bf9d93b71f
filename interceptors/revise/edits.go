package revise

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
)

// claimIdentity names a claim independently of its position: unitId and claim for
// a unit claim, the claim text for an event or timeline claim.
type claimIdentity struct {
	field string // unitClaims, eventClaims, timelineClaims
	unit  string // the UnitId ("" for event and timeline claims)
	claim string
}

func (c claimIdentity) String() string {
	if c.field == claims.UnitClaimsField {
		return c.field + " " + c.unit + " " + c.claim
	}
	return c.field + " " + strconv.Quote(c.claim)
}

func unitIdentity(u *claims.UnitClaim) claimIdentity {
	id := strings.TrimSpace(u.UnitIDRaw)
	if u.HasUnitID {
		id = strconv.FormatInt(u.UnitID, 10)
	}
	return claimIdentity{field: claims.UnitClaimsField, unit: id, claim: u.Claim}
}

// allIdentities returns the identities of every claim of content's usable block.
func (r *Revise) allIdentities(content string) ([]claimIdentity, []string, bool) {
	if r.parser == nil {
		return nil, nil, false
	}
	c := r.parser.Parse(content, claims.Optional)
	if !c.Usable() {
		return nil, nil, false
	}
	var ids []claimIdentity
	var paths []string
	for i := range c.UnitClaims {
		ids = append(ids, unitIdentity(&c.UnitClaims[i]))
		paths = append(paths, c.UnitClaims[i].Path)
	}
	for _, list := range [...]struct {
		field string
		cs    []claims.Claim
	}{{claims.EventClaimsField, c.EventClaims}, {claims.TimelineClaimsField, c.TimelineClaims}} {
		for i := range list.cs {
			ids = append(ids, claimIdentity{field: list.field, claim: list.cs[i].Claim})
			paths = append(paths, list.cs[i].Path)
		}
	}
	return ids, paths, true
}

// identities returns the identities of content's claims whose path is not flagged.
func (r *Revise) identities(content string, flagged map[string]bool) []claimIdentity {
	ids, paths, ok := r.allIdentities(content)
	if !ok {
		return nil
	}
	out := make([]claimIdentity, 0, len(ids))
	for i, id := range ids {
		if !flagged[paths[i]] {
			out = append(out, id)
		}
	}
	return out
}

// dropped returns the kept identities that content no longer has (all of them when
// content has no usable claims block).
func (r *Revise) dropped(kept []claimIdentity, content string) []string {
	if len(kept) == 0 {
		return nil
	}
	ids, _, _ := r.allIdentities(content)
	have := make(map[claimIdentity]bool, len(ids))
	for _, id := range ids {
		have[id] = true
	}
	var lost []string
	for _, id := range kept {
		if !have[id] {
			lost = append(lost, id.String())
		}
	}
	return lost
}

// appendClaims returns draft with the claims block of a repair answer appended
// after the marker, and whether the answer held a block. The repair answer's own
// prose is not kept: the client reads the draft's. The result ends as the draft
// did (with a line break or without), so that stripping the block again gives the
// draft's bytes.
func (r *Revise) appendClaims(draft, reply string) (string, bool) {
	if r.parser == nil {
		return draft, false
	}
	c := r.parser.Parse(reply, claims.Optional)
	if !c.Found {
		return draft, false
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(draft, " \t\r\n"))
	b.WriteString("\n\n")
	if m := r.parser.Marker(); m != "" {
		b.WriteString(m)
		b.WriteByte('\n')
	}
	b.WriteString("```json\n")
	b.WriteString(strings.Trim(c.Block, "\r\n"))
	b.WriteString("\n```")
	switch {
	case strings.HasSuffix(draft, "\r\n"):
		b.WriteString("\r\n")
	case strings.HasSuffix(draft, "\n"):
		b.WriteByte('\n')
	}
	return b.String(), true
}

// stripClaims removes the claims block and its marker from content.
func (r *Revise) stripClaims(content string) string {
	if r.parser == nil {
		return content
	}
	return r.parser.StripBlock(content)
}

// belief orders evidence levels by how strongly they assert the claimed identity:
// ruled out asserts it least (it asserts the opposite), confirmed most. A
// downgrade never raises a claim in this order.
func belief(l claims.Level) int {
	switch l {
	case claims.RuledOut:
		return 0
	case claims.Uncertain:
		return 1
	case claims.Possible:
		return 2
	case claims.HighlyLikely:
		return 3
	}
	return 4 // Confirmed
}

// Downgraded reports whether issue is one the downgrade acts on when the revision
// budget is spent, and the level it recommends:
//   - an issue at or above the threshold inside a claim: its recommended level, or
//     uncertain when it recommends none (the facts contradict the claim and
//     nothing else supports it);
//   - an issue below the threshold but at least WeakEvidence inside a claim that
//     recommends a level (evidence.ambiguous, builder.not_observed,
//     claim.no_evidence, unit.not_observed): that level.
//
// Issues outside a claim (the root, a whole claims array, revision.leak) are never
// downgraded: there is no claim to edit.
func Downgraded(is interceptors.Issue, threshold interceptors.Severity) (claims.Level, bool) {
	if claims.ClaimPath(is.Path) == "" {
		return 0, false
	}
	l, known := claims.ParseLevel(is.Recommendation.EvidenceLevel)
	switch {
	case is.Severity >= threshold:
		if !known {
			l = claims.Uncertain
		}
		return l, true
	case is.Severity >= interceptors.WeakEvidence && known:
		return l, true
	}
	return 0, false
}

// claimState is what a downgrade needs to know of one claim.
type claimState struct {
	level        claims.Level
	known        bool
	raw          string
	unit         bool
	alternatives []string
}

// downgrade edits content's claims block so that every claim flagged by issues
// (see Downgraded) is at most at its recommended level and lists its recommended
// alternatives. The prose is left byte-identical. It returns the new content, the
// edits made and notes on what could not be done.
func (r *Revise) downgrade(content string, issues []interceptors.Issue, threshold interceptors.Severity) (string, []interceptors.Downgrade, []string) {
	type target struct {
		level claims.Level
		alts  []string
	}
	targets := map[string]*target{}
	for _, is := range issues {
		l, ok := Downgraded(is, threshold)
		if !ok {
			continue
		}
		p := claims.ClaimPath(is.Path)
		t := targets[p]
		if t == nil {
			t = &target{level: claims.Confirmed}
			targets[p] = t
		}
		if belief(l) < belief(t.level) {
			t.level = l
		}
		for _, a := range is.Recommendation.Alternatives {
			if a = strings.TrimSpace(a); a != "" && !containsString(t.alts, a) {
				t.alts = append(t.alts, a)
			}
		}
	}
	if len(targets) == 0 {
		return content, nil, nil
	}
	if r.parser == nil {
		return content, nil, []string{fmt.Sprintf("pack %s has no claims contract: %d flagged claims cannot be downgraded", r.pack.Name, len(targets))}
	}
	c := r.parser.Parse(content, claims.Optional)
	if !c.Usable() {
		return content, nil, []string{fmt.Sprintf("the answer has no usable claims block: %d flagged claims cannot be downgraded", len(targets))}
	}
	var order []string
	states := map[string]claimState{}
	for i := range c.UnitClaims {
		u := &c.UnitClaims[i]
		order = append(order, u.Path)
		states[u.Path] = claimState{level: u.Level, known: u.LevelKnown, raw: u.LevelRaw, unit: true, alternatives: u.Alternatives}
	}
	for _, list := range [...][]claims.Claim{c.EventClaims, c.TimelineClaims} {
		for i := range list {
			order = append(order, list[i].Path)
			states[list[i].Path] = claimState{level: list[i].Level, known: list[i].LevelKnown, raw: list[i].LevelRaw}
		}
	}
	var edits []claims.Edit
	var done []interceptors.Downgrade
	var notes []string
	for _, p := range slices.Sorted(maps.Keys(targets)) {
		if _, ok := states[p]; !ok {
			notes = append(notes, "flagged claim "+p+" is not in the returned answer's claims block; not downgraded")
		}
	}
	for _, p := range order {
		t := targets[p]
		if t == nil {
			continue
		}
		st := states[p]
		e := claims.Edit{Path: p}
		to := st.level
		if belief(t.level) < belief(st.level) || !st.known {
			to = min2(t.level, st.level)
			e.Level = to.String()
		}
		if st.unit {
			for _, a := range t.alts {
				if !containsTrimmed(st.alternatives, a) {
					e.AddAlternatives = append(e.AddAlternatives, a)
				}
			}
		}
		if e.Level == "" && len(e.AddAlternatives) == 0 {
			continue
		}
		from := st.level.String()
		if !st.known {
			from = st.raw
		}
		edits = append(edits, e)
		done = append(done, interceptors.Downgrade{Path: p, From: from, To: to.String(), Alternatives: e.AddAlternatives})
	}
	if len(edits) == 0 {
		return content, nil, notes
	}
	out, err := claims.Downgrade(content, c, edits)
	if err != nil {
		return content, nil, append(notes, "downgrading failed: "+err.Error())
	}
	return out, done, notes
}

// min2 returns the level of lower belief.
func min2(a, b claims.Level) claims.Level {
	if belief(a) <= belief(b) {
		return a
	}
	return b
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func containsTrimmed(list []string, s string) bool {
	for _, v := range list {
		if strings.TrimSpace(v) == s {
			return true
		}
	}
	return false
}

// issueKeys returns a key per issue of content that does not depend on claim
// positions: an issue inside a claim is keyed by the claim's identity (and, for an
// evidence item, by the item's text), so a revision that abandons one claim — and
// shifts the others up — does not make their old issues look new.
func (r *Revise) issueKeys(content string, issues []interceptors.Issue) []string {
	ids, paths, _ := r.allIdentities(content)
	byPath := make(map[string]claimIdentity, len(ids))
	for i, p := range paths {
		byPath[p] = ids[i]
	}
	var evidence map[string]string
	keys := make([]string, len(issues))
	for i, is := range issues {
		key := is.Code + "|" + is.Severity.String() + "|"
		claimPath := claims.ClaimPath(is.Path)
		id, ok := byPath[claimPath]
		if !ok {
			keys[i] = key + is.Path
			continue
		}
		key += id.String()
		if claimPath != is.Path {
			if evidence == nil {
				evidence = r.evidenceTexts(content)
			}
			key += "|" + evidence[is.Path]
		}
		keys[i] = key
	}
	return keys
}

// evidenceTexts maps each evidence item's path to its raw text.
func (r *Revise) evidenceTexts(content string) map[string]string {
	out := map[string]string{}
	if r.parser == nil {
		return out
	}
	c := r.parser.Parse(content, claims.Optional)
	for i := range c.UnitClaims {
		for _, e := range c.UnitClaims[i].Evidence {
			out[e.Path] = e.Raw
		}
	}
	for _, list := range [...][]claims.Claim{c.EventClaims, c.TimelineClaims} {
		for i := range list {
			for _, e := range list[i].Evidence {
				out[e.Path] = e.Raw
			}
		}
	}
	return out
}
