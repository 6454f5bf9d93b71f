package revise

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/knowledge"
)

// claimIdentity names a claim independently of its position: unitId and claim for
// a unit claim, the claim text for an event or timeline claim, and for a claim of
// another declared kind the text of its required fields (else of its claim field).
type claimIdentity struct {
	field string // the kind: unitClaims, eventClaims, timelineClaims, orderClaims...
	unit  string // the UnitId ("" for other claims)
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

// recordIdentity is the identity of any declared kind's claim (unitIdentity for
// a unit claim).
func recordIdentity(rec *claims.Record, required []string) claimIdentity {
	claim, _ := rec.Field("claim")
	text, _ := claim.(string)
	switch rec.Kind {
	case claims.UnitClaimsField:
		return claimIdentity{field: rec.Kind, unit: strings.TrimSpace(rec.FieldText("unitId")), claim: text}
	case claims.EventClaimsField, claims.TimelineClaimsField:
		return claimIdentity{field: rec.Kind, claim: text}
	}
	if len(required) > 0 {
		parts := make([]string, len(required))
		for i, f := range required {
			parts[i] = strings.TrimSpace(rec.FieldText(f))
		}
		text = strings.Join(parts, " | ")
	}
	return claimIdentity{field: rec.Kind, claim: text}
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
	for i := range c.Records {
		rec := &c.Records[i]
		ids = append(ids, recordIdentity(rec, r.parser.Required(rec.Kind)))
		paths = append(paths, rec.Path)
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
func (r *Revise) stripClaims(content string) string { return r.stripClaimsIn(nil, content) }

// stripClaimsIn is stripClaims reusing the block's location when l remembers
// content (the validation step located the draft's block).
func (r *Revise) stripClaimsIn(l *claims.Locations, content string) string {
	if r.parser == nil {
		return content
	}
	return r.parser.StripBlockIn(l, content)
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

// Downgraded reports whether issue is one the downgrade acts on by lowering its
// claim, and the level it recommends:
//   - an issue at or above the threshold inside a claim: its recommended level, or
//     uncertain when it recommends none (the facts contradict the claim and
//     nothing else supports it);
//   - an issue below the threshold but at least WeakEvidence inside a claim that
//     recommends a level (evidence.ambiguous, builder.not_observed,
//     claim.no_evidence): that level.
//
// Issues outside a claim (the root, a whole claims array, revision.leak) are never
// downgraded: there is no claim to edit; nor are issues that recommend removing
// their claim (unit.not_observed, asset.unknown): the claim goes. (The downgrade
// acts on a few more issues without lowering their claim: see acts.)
func Downgraded(is interceptors.Issue, threshold interceptors.Severity) (claims.Level, bool) {
	if claims.ClaimPath(is.Path) == "" || is.Recommendation.Remove {
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

// action is what the downgrade does for one issue.
type action struct {
	level    claims.Level // the level to lower the claim to, when hasLevel
	hasLevel bool
	remove   bool // the claim is removed from the claims block
}

// acts reports whether the downgrade acts on is, and how: an issue from
// WeakEvidence up inside a claim whose recommendation is to remove the claim
// (unit.not_observed, asset.unknown), at any threshold; every issue Downgraded
// names; and below the threshold also a WeakEvidence or Warning issue whose
// recommendation it can apply without a level — alternatives, the player the facts
// name, an evidence item the facts contradict (Contradiction or worse), or the
// pack's confirm text for the code (claim.no_alternatives).
func (r *Revise) acts(is interceptors.Issue, threshold interceptors.Severity) (action, bool) {
	cp := claims.ClaimPath(is.Path)
	if cp == "" {
		return action{}, false
	}
	if is.Recommendation.Remove {
		return action{remove: true}, is.Severity >= interceptors.WeakEvidence
	}
	if l, ok := Downgraded(is, threshold); ok {
		return action{level: l, hasLevel: true}, true
	}
	if is.Severity < interceptors.WeakEvidence {
		return action{}, false
	}
	rec := is.Recommendation
	falseItem := cp != is.Path && is.Severity >= interceptors.Contradiction
	if len(rec.Alternatives) > 0 || rec.Player != "" || falseItem || r.hasConfirm(is.Code) {
		return action{}, true
	}
	return action{}, false
}

func (r *Revise) hasConfirm(code string) bool {
	m, ok := r.pack.Messages[code]
	return ok && m.ConfirmTmpl != nil
}

// confirmText is what a claim's needsConfirmation gets for is: the pack's confirm
// text, else the issue's message; ok is false when the pack has no confirm text.
func (r *Revise) confirmText(is interceptors.Issue) (string, bool) {
	if t, ok, err := r.pack.FormatConfirm(is.Code, is); ok && err == nil && t != "" {
		return t, true
	}
	msg, _ := r.issueText(is)
	return msg, false
}

// claimState is what a downgrade needs to know of one claim: its level and the
// fields its kind declares that the downgrade edits (a unit claim of ra3 has them
// all; its event and timeline claims only a level and needsConfirmation).
type claimState struct {
	level        claims.Level
	known        bool
	raw          string
	hasLevel     bool // the kind has a level field
	hasAlts      bool // ... alternatives
	hasPlayer    bool // ... player
	hasConfirm   bool // ... needsConfirmation
	hedge        bool // the contract's rule: a hedged claim names alternatives or what would confirm it
	player       string
	alternatives []string
	confirm      []string // needsConfirmation
}

// claimPlan collects what the issues of one claim ask the downgrade to do.
type claimPlan struct {
	level    claims.Level // the lowest recommended level (Confirmed: none)
	alts     []string
	player   string
	remove   []int    // evidence positions the facts contradict
	removed  []string // their text
	confirm  []string // needsConfirmation to add
	fallback []string // issue messages, for a hedged unit claim left with neither alternatives nor needsConfirmation
	drop     bool     // the claim is removed
}

// downgrade edits content's claims block so that every claim the issues flag (see
// acts) keeps the claims contract and says no more than the facts support:
//   - its evidenceLevel is at most the lowest recommended level (never raised);
//   - the recommended alternatives are added (unit claims), and the player the
//     facts name replaces another one;
//   - evidence items the facts contradict are removed, each listed in
//     needsConfirmation as unverified (the pack's confirm text for its issue);
//   - the pack's confirm text of each claim-level issue is added to
//     needsConfirmation, and a unit claim left possible or uncertain with neither
//     alternatives nor needsConfirmation gets its issues' messages there;
//   - a claim an issue recommends removing (a UnitId the facts never show, an
//     asset the knowledge does not know: no edit makes it honest) is removed from
//     the claims block, after the other edits; the claims after it move up. When
//     another issue corrects the claim's player, the claim is edited instead, and
//     removed in a later round (settle) only if the issue survives the correction.
//
// The prose is left byte-identical. It returns the new content, the edits made
// (with the paths of content's claims) and notes on what could not be done.
func (r *Revise) downgrade(content string, issues []interceptors.Issue, threshold interceptors.Severity) (string, []interceptors.Downgrade, []string) {
	flagged := 0
	for _, is := range issues {
		if _, ok := r.acts(is, threshold); ok {
			flagged++
		}
	}
	if flagged == 0 {
		return content, nil, nil
	}
	if r.parser == nil {
		return content, nil, []string{fmt.Sprintf("pack %s has no claims contract: %d flagged claims cannot be downgraded", r.pack.Name, flagged)}
	}
	c := r.parser.Parse(content, claims.Optional)
	if !c.Usable() {
		return content, nil, []string{fmt.Sprintf("the answer has no usable claims block: %d flagged claims cannot be downgraded", flagged)}
	}
	type item struct {
		pos int
		raw string
	}
	var order []string
	states := map[string]claimState{}
	items := map[string]item{} // evidence path -> position and text
	addItems := func(evidence []claims.Evidence) {
		for j := range evidence {
			items[evidence[j].Path] = item{j, evidence[j].Raw}
		}
	}
	for i := range c.Records {
		rec := &c.Records[i]
		order = append(order, rec.Path)
		st := claimState{level: rec.Level, known: rec.LevelKnown, raw: rec.LevelRaw,
			hasLevel:   rec.HasLevel(),
			hasAlts:    rec.Declares(claims.FieldAlternatives) == knowledge.FieldStrings,
			hasPlayer:  rec.Declares(claims.FieldPlayer) == knowledge.FieldString,
			hasConfirm: rec.Declares(claims.FieldNeedsConfirmation) == knowledge.FieldStrings}
		st.hedge = st.hasAlts && st.hasConfirm
		if v, ok := rec.Field(claims.FieldPlayer); ok {
			st.player, _ = v.(string)
		}
		if v, ok := rec.Field(claims.FieldAlternatives); ok {
			st.alternatives, _ = v.([]string)
		}
		if v, ok := rec.Field(claims.FieldNeedsConfirmation); ok {
			st.confirm, _ = v.([]string)
		}
		states[rec.Path] = st
		addItems(rec.Evidence)
	}
	plans := map[string]*claimPlan{}
	var notes []string
	missing := map[string]bool{}
	for _, is := range issues {
		act, ok := r.acts(is, threshold)
		if !ok {
			continue
		}
		p := claims.ClaimPath(is.Path)
		st, known := states[p]
		if !known {
			if !missing[p] {
				missing[p] = true
				notes = append(notes, "flagged claim "+p+" is not in the returned answer's claims block; not downgraded")
			}
			continue
		}
		plan := plans[p]
		if plan == nil {
			plan = &claimPlan{level: claims.Confirmed}
			plans[p] = plan
		}
		if act.remove {
			plan.drop = true
			continue
		}
		if act.hasLevel && belief(act.level) < belief(plan.level) {
			plan.level = act.level
		}
		for _, a := range is.Recommendation.Alternatives {
			plan.alts = appendNew(plan.alts, a)
		}
		if pl := strings.TrimSpace(is.Recommendation.Player); pl != "" && st.hasPlayer {
			plan.player = pl
		}
		if p != is.Path {
			if it, ok := items[is.Path]; ok && is.Severity >= interceptors.Contradiction && !slices.Contains(plan.remove, it.pos) {
				plan.remove = append(plan.remove, it.pos)
				plan.removed = append(plan.removed, it.raw)
				text, _ := r.confirmText(is)
				plan.confirm = appendNew(plan.confirm, text)
			}
		} else if text, ok := r.confirmText(is); ok {
			plan.confirm = appendNew(plan.confirm, text)
		}
		msg, _ := r.issueText(is)
		plan.fallback = appendNew(plan.fallback, msg)
	}
	var edits []claims.Edit
	var done []interceptors.Downgrade
	for _, p := range order {
		plan := plans[p]
		if plan == nil {
			continue
		}
		st := states[p]
		from := st.level.String()
		if !st.known {
			from = st.raw
		}
		// A claim whose player this edit corrects is removed only when its issue
		// survives the correction (asset.unknown is judged in the claimed player's
		// faction): the next round's re-validation decides.
		fixesPlayer := st.hasPlayer && plan.player != "" && plan.player != st.player
		if plan.drop && !fixesPlayer {
			// Removed: the other edits of the claim would be moot.
			edits = append(edits, claims.Edit{Path: p, Remove: true})
			done = append(done, interceptors.Downgrade{Path: p, From: from, To: from, Removed: true})
			continue
		}
		e := claims.Edit{Path: p}
		to := st.level
		if st.hasLevel && (belief(plan.level) < belief(st.level) || (!st.known && plan.level != claims.Confirmed)) {
			to = min2(plan.level, st.level)
			e.Level = to.String()
		}
		if st.hasAlts {
			for _, a := range plan.alts {
				if !containsTrimmed(st.alternatives, a) {
					e.AddAlternatives = append(e.AddAlternatives, a)
				}
			}
		}
		if st.hasPlayer && plan.player != "" && plan.player != st.player {
			e.Player = plan.player
		}
		e.RemoveEvidence = plan.remove
		if st.hasConfirm {
			for _, t := range plan.confirm {
				if !containsTrimmed(st.confirm, t) {
					e.AddNeedsConfirmation = append(e.AddNeedsConfirmation, t)
				}
			}
		}
		// The contract: a possible or uncertain unit claim (a claim of a kind
		// with both lists) names alternatives or what would confirm it.
		if st.hedge && to.Hedged() && len(st.alternatives)+len(e.AddAlternatives) == 0 && len(st.confirm)+len(e.AddNeedsConfirmation) == 0 {
			e.AddNeedsConfirmation = plan.fallback
		}
		if e.Level == "" && len(e.AddAlternatives) == 0 && e.Player == "" && len(e.RemoveEvidence) == 0 && len(e.AddNeedsConfirmation) == 0 {
			continue
		}
		edits = append(edits, e)
		done = append(done, interceptors.Downgrade{Path: p, From: from, To: to.String(), Alternatives: e.AddAlternatives,
			RemovedEvidence: plan.removed, NeedsConfirmation: e.AddNeedsConfirmation, Player: e.Player})
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

// appendNew appends s (trimmed) unless it is blank or already in list.
func appendNew(list []string, s string) []string {
	if s = strings.TrimSpace(s); s == "" || containsString(list, s) {
		return list
	}
	return append(list, s)
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
	for i := range c.Records {
		for _, e := range c.Records[i].Evidence {
			out[e.Path] = e.Raw
		}
	}
	return out
}
