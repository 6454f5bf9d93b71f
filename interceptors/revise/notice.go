package revise

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/knowledge"
)

// HeaderNotice is the response header that carries the notice under
// revise.notice header (and for an answer that must be JSON): the notice's UTF-8
// text percent-encoded (every byte but A–Z a–z 0–9 - . _ ~), so any URL decoder
// reads it (decodeURIComponent, urllib.parse.unquote, url.PathUnescape). With
// several choices the value lists each choice's notice as "index:text", comma
// separated.
const HeaderNotice = "X-Factgate-Notice"

// maxDowngradeRounds bounds how often the downgrade edits an answer again after
// re-validating its own edit (a player set to the owner can expose an identity
// rule for the new player). Levels only go down and evidence only goes away, so
// two rounds settle every case the rules know; the third is a margin.
const maxDowngradeRounds = 3

// noticeMode is the request's notice mode: the variant's override, else the
// route's, else the pack's default.
func (ru *run) noticeMode() NoticeMode {
	if o := ru.ex.Overrides.Notice; o != nil {
		if m, err := ParseNoticeMode(*o); err == nil {
			return m
		}
	}
	return ru.cfg.notice
}

// jsonAnswer reports an answer that must be JSON: the pack's answer is a JSON
// object, or the client asked for JSON mode. Appending text would break it.
func (ru *run) jsonAnswer() bool {
	if ru.r.pack.Answer != nil {
		return true
	}
	body := ru.ex.Original
	if body == nil {
		body = ru.ex.Body
	}
	return reqcontext.IsJSONMode(string(body))
}

// settle downgrades content by the issues of the returned attempt (best), then
// re-validates the edited answer with the deterministic validators and downgrades
// what its own edit exposed, at most maxDowngradeRounds times. It returns the
// content as delivered, its issues (with its paths), the edits (one per claim, with
// the returned attempt's paths) and the claims removed, to find the returned
// attempt's path of a claim of the delivered answer.
func (ru *run) settle(ctx context.Context, best *attempt) (string, []interceptors.Issue, []interceptors.Downgrade, removals) {
	content, issues := best.content, best.issues
	var edits []interceptors.Downgrade
	var gone removals
	for range maxDowngradeRounds {
		next, done, notes := ru.r.downgrade(content, issues, ru.cfg.threshold)
		for _, n := range notes {
			ru.ex.Trace.Note("revise: " + ru.prefix() + n)
		}
		if len(done) == 0 {
			break
		}
		content = next
		var round map[string][]int
		for i := range done {
			if done[i].Removed {
				field, idx, _ := splitClaimPath(done[i].Path)
				if round == nil {
					round = map[string][]int{}
				}
				round[field] = append(round[field], idx)
			}
			done[i].Path = gone.origin(done[i].Path)
		}
		if round != nil {
			for _, idxs := range round {
				slices.Sort(idxs)
			}
			gone = append(gone, round)
		}
		edits = mergeDowngrades(edits, done)
		issues = ru.recheck(ctx, content, best.issues)
	}
	return content, issues, edits, gone
}

// removals are the claims the downgrade removed, one map per round that removed
// any: the array's field to the removed indexes (ascending), numbered as in the
// content that round edited.
type removals []map[string][]int

// origin returns the path in the returned attempt of what path names in the
// content after the removals (the claims after a removed one moved up); a path
// outside a claim is returned as it is.
func (rm removals) origin(path string) string {
	if len(rm) == 0 {
		return path
	}
	field, idx, ok := splitClaimPath(path)
	if !ok {
		return path
	}
	for k := len(rm) - 1; k >= 0; k-- {
		for _, r := range rm[k][field] {
			if r > idx {
				break
			}
			idx++
		}
	}
	return field + "[" + strconv.Itoa(idx) + "]" + path[len(claims.ClaimPath(path)):]
}

// splitClaimPath reads the claim a path is in: "unitClaims", 2 for
// "unitClaims[2].evidence[0]".
func splitClaimPath(path string) (field string, idx int, ok bool) {
	cp := claims.ClaimPath(path)
	if cp == "" {
		return "", 0, false
	}
	open := strings.IndexByte(cp, '[')
	idx, err := strconv.Atoi(cp[open+1 : len(cp)-1])
	return cp[:open], idx, err == nil
}

// recheck validates an answer factgate edited: the deterministic validators run
// again; the issues of the LLM-backed validators and of this step (revision.leak)
// are carried over from the answer it edited, whose prose is unchanged.
func (ru *run) recheck(ctx context.Context, content string, from []interceptors.Issue) []interceptors.Issue {
	ex := ru.ex
	issues, errs := ex.CheckAnswer(ctx, content)
	if len(errs) > 0 {
		ex.Trace.Do(func(t *interceptors.Trace) { t.ValidationIncomplete = true })
		for _, err := range errs {
			ex.Trace.Note("revise: " + ru.prefix() + "validating the downgraded answer: " + err.Error())
		}
	}
	carried := map[string]bool{ValidatorName: true}
	for _, v := range ex.Validators {
		if v.LLMBacked() {
			carried[v.Name()] = true
		}
	}
	for _, is := range from {
		if carried[is.Validator] {
			issues = append(issues, is)
		}
	}
	return issues
}

// mergeDowngrades adds the edits of a later round to those of the earlier ones:
// one record per claim, from its first level to its last.
func mergeDowngrades(all, more []interceptors.Downgrade) []interceptors.Downgrade {
	for _, d := range more {
		i := -1
		for j := range all {
			if all[j].Path == d.Path {
				i = j
				break
			}
		}
		if i < 0 {
			all = append(all, d)
			continue
		}
		m := &all[i]
		if m.Removed {
			continue // a removed claim is edited no further
		}
		m.Removed = d.Removed
		m.To = d.To
		m.Alternatives = append(m.Alternatives, d.Alternatives...)
		m.RemovedEvidence = append(m.RemovedEvidence, d.RemovedEvidence...)
		m.NeedsConfirmation = append(m.NeedsConfirmation, d.NeedsConfirmation...)
		if d.Player != "" {
			m.Player = d.Player
		}
	}
	return all
}

// changesMeaning reports an edit after which the claims block no longer says what
// the prose says: a lower level, a removed citation, another player, a removed
// claim.
func changesMeaning(d interceptors.Downgrade) bool {
	return d.From != d.To || len(d.RemovedEvidence) > 0 || d.Player != "" || d.Removed
}

// notice builds the note to the reader for one choice: every claim whose problem
// reaches the text the reader sees — a claim of the returned attempt with an issue
// above Info (its prose states it, whatever the downgrade did to the claims
// block), a claim the downgrade changed the meaning of or removed, and a claim the
// delivered answer still has an issue above Info on — each with its own findings
// (what the facts say), under the heading its findings' codes declare; and every
// issue above Info outside a claim. A claim's findings are its own: claims that
// share an evidence string, a code or a message are each named with theirs.
// Claims are named by their paths in the returned attempt (gone maps the
// delivered answer's paths to them). It reports false when nothing survived.
func (ru *run) notice(best *attempt, delivered []interceptors.Issue, deliveredContent string, edits []interceptors.Downgrade, gone removals) (knowledge.NoticeData, []interceptors.NoticeIssue, bool) {
	r := ru.r
	if len(gone) > 0 {
		delivered = slices.Clone(delivered)
		for i := range delivered {
			delivered[i].Path = gone.origin(delivered[i].Path)
		}
	}
	var data knowledge.NoticeData
	var named []interceptors.NoticeIssue
	edited := map[string]interceptors.Downgrade{}
	for _, d := range edits {
		edited[d.Path] = d
	}
	toName := map[string]bool{} // the claims to name, by path
	var order []string
	add := func(p string) {
		if !toName[p] {
			toName[p] = true
			order = append(order, p)
		}
	}
	for _, d := range edits {
		if changesMeaning(d) {
			add(d.Path)
		}
	}
	for _, is := range best.issues {
		if p := claims.ClaimPath(is.Path); p != "" && is.Severity > interceptors.Info {
			add(p)
		}
	}
	var other []interceptors.Issue
	for _, is := range delivered {
		if is.Severity <= interceptors.Info {
			continue
		}
		if p := claims.ClaimPath(is.Path); p != "" {
			add(p)
		} else {
			other = append(other, is)
		}
	}
	if len(order) == 0 && len(other) == 0 {
		return data, nil, false
	}
	slices.SortStableFunc(order, compareClaimPaths)
	stated := r.describeClaims(best.content)
	now := r.describeClaims(deliveredContent)
	if len(gone) > 0 {
		moved := make(map[string]knowledge.NoticeClaim, len(now))
		for p, nc := range now {
			moved[gone.origin(p)] = nc
		}
		now = moved
	}
	// finding returns is as the notice names it, once per seen (a claim's own
	// findings, or those outside the claims): the returned attempt's issue and the
	// delivered answer's are one finding.
	finding := func(is interceptors.Issue, seen map[string]bool) (knowledge.NoticeFinding, bool) {
		msg, _ := r.issueText(is)
		key := is.Code + "\x00" + msg
		if seen[key] {
			return knowledge.NoticeFinding{}, false
		}
		seen[key] = true
		sev := is.Severity.String()
		heading := r.pack.NoticeHeading(is.Code, sev)
		named = append(named, interceptors.NoticeIssue{Code: is.Code, Severity: is.Severity, Path: is.Path, Heading: heading})
		return knowledge.NoticeFinding{Code: is.Code, Severity: sev, Heading: heading, Message: msg}, true
	}
	for _, p := range order {
		nc, ok := stated[p]
		if !ok {
			nc = now[p]
		}
		nc.Path = p
		nc.LevelName = r.pack.LevelName(nc.Level)
		if d, ok := edited[p]; ok {
			nc.Removed = d.RemovedEvidence
			if d.From != d.To {
				nc.NewLevel, nc.NewLevelName = d.To, r.pack.LevelName(d.To)
			}
		}
		nc.Alternatives = now[p].Alternatives
		seen := map[string]bool{}
		// Most severe first, the returned attempt's issues (what its prose states)
		// before those the delivered answer still has.
		for s := interceptors.Fatal; s > interceptors.Info; s-- {
			for _, list := range [...][]interceptors.Issue{best.issues, delivered} {
				for _, is := range list {
					if is.Severity != s || claims.ClaimPath(is.Path) != p {
						continue
					}
					if f, ok := finding(is, seen); ok {
						nc.Findings = append(nc.Findings, f)
					}
				}
			}
		}
		data.AddClaim(nc)
	}
	seen := map[string]bool{}
	for s := interceptors.Fatal; s > interceptors.Info; s-- {
		for _, is := range other {
			if is.Severity != s {
				continue
			}
			if f, ok := finding(is, seen); ok {
				data.AddFinding(f)
			}
		}
	}
	if data.Empty() {
		return data, nil, false
	}
	return data, named, true
}

// claimLists orders the claim arrays as the contract lists them.
var claimLists = map[string]int{"unitClaims": 0, "eventClaims": 1, "timelineClaims": 2}

// compareClaimPaths orders claim paths by array (as the contract lists them),
// then by index.
func compareClaimPaths(a, b string) int {
	fa, ia, _ := splitClaimPath(a)
	fb, ib, _ := splitClaimPath(b)
	if fa != fb {
		ra, oka := claimLists[fa]
		rb, okb := claimLists[fb]
		switch {
		case oka && okb:
			return ra - rb
		case oka != okb:
			if oka {
				return -1
			}
			return 1
		}
		return strings.Compare(fa, fb)
	}
	return ia - ib
}

// describeClaims returns each claim of content as a notice names it, by path
// (empty when content has no usable claims block).
func (r *Revise) describeClaims(content string) map[string]knowledge.NoticeClaim {
	out := map[string]knowledge.NoticeClaim{}
	if r.parser == nil {
		return out
	}
	c := r.parser.Parse(content, claims.Optional)
	if !c.Usable() {
		return out
	}
	for i := range c.Records {
		rec := &c.Records[i]
		nc := knowledge.NoticeClaim{Path: rec.Path, Kind: noticeKind(rec.Kind), Level: rec.Level.String()}
		if v, ok := rec.Field("claim"); ok {
			nc.Claim, _ = v.(string)
		}
		if rec.Kind == claims.UnitClaimsField {
			nc.Unit = strings.TrimSpace(rec.FieldText("unitId"))
		}
		if v, ok := rec.Field(claims.FieldPlayer); ok {
			nc.Player, _ = v.(string)
		}
		if v, ok := rec.Field(claims.FieldAlternatives); ok {
			nc.Alternatives, _ = v.([]string)
		}
		out[rec.Path] = nc
	}
	return out
}

// placeNotice adds the notice after the answer's text: before a claims block (so
// that an app that shows the text up to the block shows it, and the block stays
// the last part of the answer), else at the end. The answer keeps its final line
// break. The block's location is reused when l remembers content.
func (r *Revise) placeNotice(l *claims.Locations, content, notice string) string {
	at := len(content)
	if r.parser != nil {
		loc := r.parser.LocateIn(l, content)
		if loc.Found {
			at = loc.Fence.Start
			if loc.Marker && loc.MarkerSpan.Start < at {
				at = loc.MarkerSpan.Start
			}
			// Start the notice at the beginning of the line the block's marker or
			// fence is on.
			at = strings.LastIndexByte(content[:at], '\n') + 1
		}
	}
	head := strings.TrimRight(content[:at], " \t\r\n")
	tail := content[at:]
	var b strings.Builder
	b.Grow(len(content) + len(notice) + 4)
	b.WriteString(head)
	if head != "" {
		b.WriteString("\n\n")
	}
	b.WriteString(notice)
	switch {
	case tail != "":
		b.WriteString("\n\n")
		b.WriteString(tail)
	case strings.HasSuffix(content, "\r\n"):
		b.WriteString("\r\n")
	case strings.HasSuffix(content, "\n"):
		b.WriteByte('\n')
	}
	return b.String()
}

// MaxNoticeHeader bounds the X-Factgate-Notice value in bytes: proxies in front of
// clients commonly refuse response headers over 4–8 KiB. A longer notice is cut
// after its last whole line that fits (each choice's share of the bound) and ends
// with a line "…"; the trace keeps the whole notice.
const MaxNoticeHeader = 4096

// noticeHeader renders the X-Factgate-Notice value: the percent-encoded text, or
// with several choices "index:text" per choice with a notice, comma separated;
// cut reports that a notice was cut to the bound.
func noticeHeader(notices []*interceptors.Notice, several bool) (value string, cut bool) {
	share := MaxNoticeHeader / len(notices)
	if !several && len(notices) == 1 {
		return boundedEncode(notices[0].Text, share)
	}
	parts := make([]string, len(notices))
	for i, n := range notices {
		prefix := strconv.Itoa(n.Choice) + ":"
		enc, c := boundedEncode(n.Text, share-len(prefix)-1)
		parts[i] = prefix + enc
		cut = cut || c
	}
	return strings.Join(parts, ","), cut
}

// ellipsisLine ends a notice cut to the header's bound.
const ellipsisLine = "\n…"

// boundedEncode percent-encodes text, cut after its last whole line that fits in
// limit bytes encoded (with the ellipsis line), or at a character when even its
// first line does not fit.
func boundedEncode(text string, limit int) (string, bool) {
	if enc := percentEncode(text); len(enc) <= limit {
		return enc, false
	}
	room := limit - len(percentEncode(ellipsisLine))
	kept := ""
	for _, line := range strings.SplitAfter(text, "\n") {
		next := kept + line
		if len(percentEncode(strings.TrimRight(next, "\n"))) > room {
			break
		}
		kept = next
	}
	kept = strings.TrimRight(kept, "\n")
	if kept == "" {
		// Even the first line is too long: whole characters of it.
		for _, r := range text {
			if len(percentEncode(kept+string(r))) > room {
				break
			}
			kept += string(r)
		}
	}
	return percentEncode(kept + ellipsisLine), true
}

// percentEncode escapes every byte of s except the unreserved characters of RFC
// 3986, so the value is plain ASCII without spaces, commas or colons.
func percentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) * 3)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// noticeKind is how a notice names a claim's kind: "unit", "event" and
// "timeline" for ra3's, another kind's name as declared.
func noticeKind(kind string) string {
	switch kind {
	case claims.UnitClaimsField:
		return "unit"
	case claims.EventClaimsField:
		return "event"
	case claims.TimelineClaimsField:
		return "timeline"
	}
	return kind
}
