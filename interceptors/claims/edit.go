package claims

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// Strip returns content without its claims block and marker: the fenced block (or
// the bare {...} group), the marker (its whole line when the rest of the line is only
// markdown decoration such as "**", "#" or ":") and the blank space around them. The
// prose keeps its bytes; where a removed piece sat between two pieces of prose they
// are joined by the whitespace that preceded the piece (or followed it, when none
// preceded it). A marker without a block is removed too. When c is nil, finds
// nothing, or was not parsed from content (its spans do not fit), content is
// returned unchanged.
func Strip(content string, c *Claims) string {
	if c == nil || (!c.Found && !c.Marker) {
		return content
	}
	var cuts [2]Span
	n := 0
	if c.Found {
		if !c.Fence.in(len(content)) || !c.Span.in(len(content)) || content[c.Span.Start:c.Span.End] != c.Block {
			return content
		}
		cuts[n] = c.Fence
		n++
	}
	if c.Marker {
		if !c.MarkerSpan.in(len(content)) {
			return content
		}
		m := markerRegion(content, c.MarkerSpan)
		switch {
		case n == 0:
			cuts[n] = m
			n++
		case m.End <= cuts[0].Start && isBlank(content[m.End:cuts[0].Start]):
			cuts[0].Start = m.Start
		case m.Start >= cuts[0].End && isBlank(content[cuts[0].End:m.Start]):
			cuts[0].End = m.End
		case m.End <= cuts[0].Start:
			cuts[0], cuts[1] = m, cuts[0]
			n++
		case m.Start >= cuts[0].End:
			cuts[1] = m
			n++
		}
	}
	out := content
	for i := n - 1; i >= 0; i-- {
		out = cut(out, cuts[i], content)
	}
	return out
}

// cut removes r and the blank space around it from s; orig is the whole original
// content (for its final line break).
func cut(s string, r Span, orig string) string {
	left, right := s[:r.Start], s[r.End:]
	lt := strings.TrimRight(left, " \t\r\n")
	rt := strings.TrimLeft(right, " \t\r\n")
	switch {
	case lt == "":
		return rt
	case rt == "":
		switch {
		case strings.HasSuffix(orig, "\r\n"):
			return withBreak(s, lt, "\r\n")
		case strings.HasSuffix(orig, "\n"):
			return withBreak(s, lt, "\n")
		}
		return lt
	}
	sep := left[len(lt):]
	if sep == "" {
		sep = right[:len(right)-len(rt)]
	}
	return lt + sep + rt
}

// withBreak returns lt, a prefix of s, followed by the line break br: a longer
// prefix of s when br follows lt there (a block at the end of an answer, the
// usual place), else a new string.
func withBreak(s, lt, br string) string {
	if strings.HasPrefix(s[len(lt):], br) {
		return s[:len(lt)+len(br)]
	}
	return lt + br
}

// markerRegion widens the marker to its whole line (without the line break) when
// the rest of the line is only markdown decoration.
func markerRegion(s string, m Span) Span {
	ls := strings.LastIndexByte(s[:m.Start], '\n') + 1
	le := len(s)
	if j := strings.IndexByte(s[m.End:], '\n'); j >= 0 {
		le = m.End + j
	}
	if decoration(s[ls:m.Start]) && decoration(s[m.End:le]) {
		return Span{ls, le}
	}
	return m
}

func decoration(s string) bool {
	return strings.Trim(s, " \t\r#*_>:-`：") == ""
}

// Edit is one deterministic change to a claim, made when the revision budget is
// spent.
type Edit struct {
	// Path is the claim: "unitClaims[2]" (see ClaimPath for issue paths below it).
	Path string
	// Level is the new evidence level in an English spelling ParseLevel reads; it is
	// written in its canonical spelling ("highly likely"). "" leaves the level.
	Level string
	// AddAlternatives are appended to the claim's alternatives, skipping blank ones
	// and ones already present; the array is created when missing (a lone string
	// becomes its first item). Only unit claims have alternatives.
	AddAlternatives []string
	// RemoveEvidence are the positions of evidence items to remove, as in their
	// paths ("evidence[1]" is 1). A lone evidence string is position 0; removing it
	// leaves an empty array.
	RemoveEvidence []int
	// AddNeedsConfirmation are appended to the claim's needsConfirmation like
	// AddAlternatives; any claim type may get them (an event or timeline claim gets
	// the array when it has none).
	AddNeedsConfirmation []string
	// Player, when not "", replaces a unit claim's player.
	Player string
	// Remove deletes the claim from its array (a claim no edit can make honest);
	// the edit's other fields are then ignored. Removals are made after every other
	// edit, so the paths of all edits are those of the claims as parsed.
	Remove bool
}

// Downgrade applies edits to the claims block of content and returns the new
// content. The block is edited with sjson on its normalised JSON (so comments and
// trailing commas disappear from it), re-indented with two spaces (field order and
// unknown fields kept, line breaks as in the original block) — or kept on one line
// when it was written on one — and spliced back into
// the same place; everything outside c.Span is left byte-identical. The edits apply in
// order, the removals last (from the end of each array, so every path names the
// claim as parsed; the claims after a removed one move up). c must be the usable
// parse of content; afterwards it is stale (parse the new content again for new
// spans and paths). It returns an error, and no content, for claims that do not
// belong to content, a path that is not a kept claim ("unitClaims[2]"), a claim that
// is not a JSON object, an unknown level, alternatives or a player for an event or
// timeline claim, or an evidence position the claim does not have.
func Downgrade(content string, c *Claims, edits []Edit) (string, error) {
	if !c.Usable() {
		return "", errors.New("claims: downgrade: the answer has no valid claims block")
	}
	if !c.Span.in(len(content)) || content[c.Span.Start:c.Span.End] != c.Block {
		return "", errors.New("claims: downgrade: the content is not the one the claims were parsed from")
	}
	if len(edits) == 0 {
		return content, nil
	}
	doc := c.JSON
	removals := map[string][]int{} // claim indexes to remove, per kind
	var removalOrder []string
	for _, e := range edits {
		name, idx, ok := parseClaimPath(e.Path)
		spec := c.kindSpec(name)
		if !ok || spec == nil {
			return "", fmt.Errorf("claims: downgrade: path %q is not a claim path like %s[2]", e.Path, c.firstKind())
		}
		if n := c.count(name); idx >= n {
			return "", fmt.Errorf("claims: downgrade %s: no such claim (%d kept in %s)", e.Path, n, name)
		}
		base := name + "." + strconv.Itoa(idx)
		if !gjson.Get(doc, base).IsObject() {
			return "", fmt.Errorf("claims: downgrade %s: the claim is not a JSON object", e.Path)
		}
		if e.Remove {
			if _, seen := removals[name]; !seen {
				removalOrder = append(removalOrder, name)
			}
			removals[name] = append(removals[name], idx)
			continue
		}
		var err error
		if e.Level != "" {
			l, ok := ParseLevel(e.Level)
			if !ok {
				return "", fmt.Errorf("claims: downgrade %s: unknown evidence level %q", e.Path, e.Level)
			}
			if spec.level < 0 {
				return "", fmt.Errorf("claims: downgrade %s: %s declares no level field", e.Path, name)
			}
			field := spec.fields[spec.level].name
			if doc, err = sjson.SetRaw(doc, base+"."+field, quoteJSON(l.String())); err != nil {
				return "", fmt.Errorf("claims: downgrade %s: setting %s: %w", e.Path, field, err)
			}
		}
		if len(e.AddAlternatives) > 0 {
			if !spec.declares(FieldAlternatives, knowledge.FieldStrings) {
				return "", fmt.Errorf("claims: downgrade %s: %s", e.Path, spec.lacks(FieldAlternatives, "only unit claims have alternatives"))
			}
			if doc, err = addAlternatives(doc, base+"."+FieldAlternatives, e.AddAlternatives); err != nil {
				return "", fmt.Errorf("claims: downgrade %s: adding alternatives: %w", e.Path, err)
			}
		}
		if e.Player != "" {
			if !spec.declares(FieldPlayer, knowledge.FieldString) {
				return "", fmt.Errorf("claims: downgrade %s: %s", e.Path, spec.lacks(FieldPlayer, "only unit claims name a player"))
			}
			if doc, err = sjson.SetRaw(doc, base+"."+FieldPlayer, quoteJSON(e.Player)); err != nil {
				return "", fmt.Errorf("claims: downgrade %s: setting player: %w", e.Path, err)
			}
		}
		if len(e.RemoveEvidence) > 0 {
			if spec.evidence < 0 {
				return "", fmt.Errorf("claims: downgrade %s: %s declares no evidence field", e.Path, name)
			}
			if doc, err = removeEvidence(doc, base+"."+spec.fields[spec.evidence].name, e.RemoveEvidence); err != nil {
				return "", fmt.Errorf("claims: downgrade %s: %w", e.Path, err)
			}
		}
		if len(e.AddNeedsConfirmation) > 0 {
			if !spec.declares(FieldNeedsConfirmation, knowledge.FieldStrings) {
				return "", fmt.Errorf("claims: downgrade %s: %s", e.Path, spec.lacks(FieldNeedsConfirmation, ""))
			}
			if doc, err = addAlternatives(doc, base+"."+FieldNeedsConfirmation, e.AddNeedsConfirmation); err != nil {
				return "", fmt.Errorf("claims: downgrade %s: adding needsConfirmation: %w", e.Path, err)
			}
		}
	}
	for _, name := range removalOrder {
		idxs := removals[name]
		slices.Sort(idxs)
		idxs = slices.Compact(idxs)
		for k := len(idxs) - 1; k >= 0; k-- {
			var err error
			if doc, err = sjson.Delete(doc, name+"."+strconv.Itoa(idxs[k])); err != nil {
				return "", fmt.Errorf("claims: downgrade %s[%d]: removing the claim: %w", name, idxs[k], err)
			}
		}
	}
	// The block keeps its layout: one written on a single line stays on one line,
	// so that the lines around it — a list item, a table row, the opening line of
	// a fence it sits on — keep their meaning; a block of several lines is
	// pretty-printed.
	block := strings.TrimRight(gjson.Get(doc, `@pretty:{"width":0}`).Raw, "\n")
	if !strings.Contains(c.Block, "\n") {
		block = gjson.Get(doc, "@ugly").Raw
	}
	if c.Fenced && (strings.HasSuffix(c.Block, "\n")) {
		block += "\n"
	}
	if strings.Contains(c.Block, "\r\n") {
		block = strings.ReplaceAll(block, "\n", "\r\n")
	}
	return content[:c.Span.Start] + block + content[c.Span.End:], nil
}

// removeEvidence removes the items at the positions from the evidence at path (an
// array, or a lone string at position 0).
func removeEvidence(doc, path string, positions []int) (string, error) {
	cur := gjson.Get(doc, path)
	if cur.Type == gjson.String {
		for _, i := range positions {
			if i != 0 {
				return "", fmt.Errorf("no evidence item at position %d (the evidence is one string)", i)
			}
		}
		return sjson.SetRaw(doc, path, "[]")
	}
	if !cur.IsArray() {
		return "", errors.New("the claim has no evidence array")
	}
	n := len(cur.Array())
	sorted := append([]int(nil), positions...)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	var err error
	for k := len(sorted) - 1; k >= 0; k-- {
		i := sorted[k]
		if i < 0 || i >= n {
			return "", fmt.Errorf("no evidence item at position %d (%d items)", i, n)
		}
		if doc, err = sjson.Delete(doc, path+"."+strconv.Itoa(i)); err != nil {
			return "", fmt.Errorf("removing evidence item %d: %w", i, err)
		}
	}
	return doc, nil
}

// addAlternatives appends the new strings to the array at path (alternatives,
// needsConfirmation).
func addAlternatives(doc, path string, add []string) (string, error) {
	cur := gjson.Get(doc, path)
	var have []string
	if cur.IsArray() {
		cur.ForEach(func(_, v gjson.Result) bool {
			if v.Type == gjson.String {
				have = append(have, strings.TrimSpace(v.Str))
			}
			return true
		})
		var err error
		for _, a := range add {
			if a = strings.TrimSpace(a); a == "" || contains(have, a) {
				continue
			}
			if doc, err = sjson.SetRaw(doc, path+".-1", quoteJSON(a)); err != nil {
				return "", err
			}
			have = append(have, a)
		}
		return doc, nil
	}
	if cur.Type == gjson.String && strings.TrimSpace(cur.Str) != "" {
		have = append(have, strings.TrimSpace(cur.Str))
	}
	for _, a := range add {
		if a = strings.TrimSpace(a); a != "" && !contains(have, a) {
			have = append(have, a)
		}
	}
	arr := []byte{'['}
	for i, a := range have {
		if i > 0 {
			arr = append(arr, ',')
		}
		arr = rawjson.AppendString(arr, a)
	}
	arr = append(arr, ']')
	return sjson.SetRaw(doc, path, string(arr))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// count returns the number of claims of a kind kept in c.
func (c *Claims) count(kind string) int {
	if len(c.Records) == 0 {
		// Claims of ra3's typed reader built without records.
		switch kind {
		case UnitClaimsField:
			return len(c.UnitClaims)
		case EventClaimsField:
			return len(c.EventClaims)
		case TimelineClaimsField:
			return len(c.TimelineClaims)
		}
	}
	n := 0
	for i := range c.Records {
		if c.Records[i].Kind == kind {
			n++
		}
	}
	return n
}

// ClaimPath returns the claim an issue path belongs to: "unitClaims[0]" for
// "unitClaims[0].evidence[1]" or "unitClaims[0]" itself, and "" for a path that is
// not inside a claim ("", "unitClaims"). A claim path is a kind's name (a JSON key
// of letters, digits and _, as claims.kinds declares them) and an index.
func ClaimPath(path string) string {
	end := strings.IndexByte(path, ']')
	if end < 0 {
		return ""
	}
	p := path[:end+1]
	if _, _, ok := parseClaimPath(p); !ok {
		return ""
	}
	if rest := path[end+1:]; rest != "" && rest[0] != '.' {
		return ""
	}
	return p
}

// parseClaimPath reads "kind[index]".
func parseClaimPath(path string) (string, int, bool) {
	open := strings.IndexByte(path, '[')
	if open <= 0 || !strings.HasSuffix(path, "]") {
		return "", 0, false
	}
	name := path[:open]
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return "", 0, false
		}
	}
	digits := path[open+1 : len(path)-1]
	if digits == "" || len(digits) > 9 || strings.Trim(digits, "0123456789") != "" {
		return "", 0, false
	}
	idx, _ := strconv.Atoi(digits)
	return name, idx, true
}

// quoteJSON renders s as a JSON string.
func quoteJSON(s string) string { return string(rawjson.AppendString(nil, s)) }

// StripBlock removes the claims block and its marker from content as Strip does,
// locating the block without parsing it (the finalize step of a hidden revision
// strips an answer it has already validated).
func (p *Parser) StripBlock(content string) string {
	return p.stripAt(content, p.Locate(content))
}

// stripAt is StripBlock with the block at loc, where Locate found it in content.
func (p *Parser) stripAt(content string, loc Location) string {
	c := &Claims{Location: loc}
	if c.Found {
		c.Block = content[c.Span.Start:c.Span.End]
	}
	return Strip(content, c)
}
