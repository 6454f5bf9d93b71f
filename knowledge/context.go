package knowledge

import (
	"regexp"
	"slices"
	"strings"
)

// Defaults of the context rules' scan bounds.
const (
	DefaultContextMaxLines = 200
	DefaultContextMaxBytes = 64 << 10
)

// Player is one player the context rules read, with the scope value of the players'
// dimension ("PlayerA", "盟军").
type Player struct {
	Name  string
	Scope string
}

// Extracted is the request context the pack's rules read from the request text.
type Extracted struct {
	// KnowledgeSet is the set the text selects; the rule's default when the rule
	// matched nothing; "" when the pack has no set rule, or it matched nothing and
	// has no default. The pack's DefaultSet is not applied here: that is the last
	// step of context resolution, after headers, metadata and the route.
	KnowledgeSet string
	// SetMatched reports whether KnowledgeSet came from a line of the text (false
	// when it is the rule's default or empty).
	SetMatched bool
	// Scopes are the scope values per dimension: the players' values in player
	// order, deduplicated, and each scope rule's value. Nil when nothing matched.
	Scopes Scopes
	// Players are the players in order, with their (mapped) scope values.
	Players []Player
}

// ExtractContext reads the request context from one text (the user message) with
// the pack's declarative context rules. See ExtractContextTexts.
func ExtractContext(p *Pack, text string) Extracted {
	return ExtractContextTexts(p, []string{text})
}

// ExtractContextTexts reads the request context from the texts (the user messages,
// in order); for each rule the first matching line wins.
//
// It runs on every request, so it is bounded: each rule's regex is matched against
// single lines, and only the first Context.MaxLines lines (default 200) within the
// first Context.MaxBytes bytes (default 64 KiB) of each text are looked at — the
// header block of an operation log is at its top, and a 17,797-line log must not
// cost a scan. Scanning stops as soon as every rule has matched. The returned
// strings are copies: they do not alias the texts.
func ExtractContextTexts(p *Pack, texts []string) Extracted {
	return extractContext(p, texts, nil)
}

// ExtractContextHeads is ExtractContextTexts on the texts' heads, which it reads
// only as far as a rule is still pending: a log's header block is in its first
// lines, so the caller decodes no more than those.
func ExtractContextHeads(p *Pack, heads TextHeads) Extracted {
	return extractContext(p, nil, heads) // nil heads: no texts
}

// extractContext reads the context from heads, or from texts when heads is nil.
func extractContext(p *Pack, texts []string, heads TextHeads) Extracted {
	var ex Extracted
	if p == nil {
		return ex
	}
	c := &p.Context
	dims := c.scopeDims
	if dims == nil && len(c.Scopes) > 0 {
		dims = c.compiledScopeDims() // a Pack built in Go rather than by LoadPack
	}
	setRule := c.KnowledgeSet
	if setRule != nil && setRule.Re == nil {
		setRule = nil
	}
	players := c.Players
	if players != nil && (players.Re == nil || players.ItemRe == nil) {
		players = nil
	}
	// The scope rules, looked up once rather than per line; a pack has a few.
	var scopeBuf [4]ValueRule
	scopeRules := scopeBuf[:0]
	for _, dim := range dims {
		scopeRules = append(scopeRules, c.Scopes[dim])
	}
	var scopeDone []bool
	// The scope values read, gathered here and made into Scopes once at the end:
	// one map assignment per dimension and one backing array for all values.
	var foundBuf [16]scopeValue
	found := scopeValues(foundBuf[:0])
	pending := len(dims)
	if pending > 0 {
		scopeDone = make([]bool, len(dims))
	}
	if setRule != nil {
		pending++
	}
	if players != nil {
		pending++
	}

	scan := newLineScan(p, texts, heads)
	for pending > 0 {
		line, ok := scan.next()
		if !ok {
			break
		}
		if setRule != nil && !ex.SetMatched && setRule.start.admits(line) {
			if v, ok := setRule.valueOf(line); ok {
				ex.KnowledgeSet, ex.SetMatched = v, true
				pending--
			}
		}
		if players != nil && ex.Players == nil && players.start.admits(line) {
			if ex.Players = players.playersOf(line); ex.Players != nil {
				for _, pl := range ex.Players {
					found = found.add(players.Dimension, pl.Scope)
				}
				pending--
			}
		}
		for i := range scopeRules {
			r := &scopeRules[i]
			if scopeDone[i] || !r.start.admits(line) {
				continue
			}
			if v, ok := r.valueOf(line); ok {
				found = found.add(dims[i], v)
				scopeDone[i] = true
				pending--
			}
		}
	}
	if setRule != nil && !ex.SetMatched {
		ex.KnowledgeSet = setRule.Default
	}
	for i, dim := range dims {
		if !scopeDone[i] {
			if d := c.Scopes[dim].Default; d != "" {
				found = found.add(dim, d)
			}
		}
	}
	ex.Scopes = found.scopes()
	return ex
}

// valueOf returns the value the rule reads from line, mapped; ok is false when
// the line does not match. A recurring line's verdict comes from the memo.
func (r *ValueRule) valueOf(line string) (string, bool) {
	if v, ok := r.memo.get(line); ok {
		return v.value, v.matched
	}
	var v valueVerdict
	if raw, ok := matchValue(r, line); ok {
		v = valueVerdict{value: mapValue(r, raw), matched: true}
	}
	r.memo.put(line, v)
	return v.value, v.matched
}

// playersOf returns the players of line when it is the players line (nil when
// it is not, or names none). The slice is the caller's; a recurring line's
// players come from the memo.
func (r *PlayersRule) playersOf(line string) []Player {
	v, ok := r.memo.get(line)
	if !ok {
		if raw, matched := matchGroup(r.Re, line, "value"); matched {
			v.players = readPlayers(r, raw)
		}
		r.memo.put(line, v)
	}
	return slices.Clone(v.players)
}

// scopeValue is one scope value the context rules read, with its dimension.
type scopeValue struct{ dim, value string }

// scopeValues are the scope values read so far, in order.
type scopeValues []scopeValue

// add returns s with value appended to dim's values, unless it is empty or dim
// has it already. (A result, not a pointer receiver, keeps the caller's array on
// its stack.)
func (s scopeValues) add(dim, value string) scopeValues {
	if value == "" {
		return s
	}
	for _, v := range s {
		if v.dim == dim && v.value == value {
			return s
		}
	}
	return append(s, scopeValue{dim, value})
}

// scopes returns the values as Scopes, each dimension's in the order read (nil
// when there are none). The dimensions' slices share one backing array, each
// capped at its length, so that appending to one cannot reach the next.
func (s scopeValues) scopes() Scopes {
	if len(s) == 0 {
		return nil
	}
	var dimBuf [8]string
	dims := dimBuf[:0] // in the order first read
	for _, v := range s {
		if !slices.Contains(dims, v.dim) {
			dims = append(dims, v.dim)
		}
	}
	all := make([]string, 0, len(s))
	out := make(Scopes, len(dims))
	for _, dim := range dims {
		start := len(all)
		for _, v := range s {
			if v.dim == dim {
				all = append(all, v.value)
			}
		}
		out[dim] = all[start:len(all):len(all)]
	}
	return out
}

// matchGroup returns the named group of the regex's first match in line.
func matchGroup(re *regexp.Regexp, line, group string) (string, bool) {
	m := re.FindStringSubmatchIndex(line)
	if m == nil {
		return "", false
	}
	g := re.SubexpIndex(group)
	if g < 0 || m[2*g] < 0 {
		return "", false
	}
	v := strings.TrimSpace(line[m[2*g]:m[2*g+1]])
	return v, v != ""
}

func matchValue(r *ValueRule, line string) (string, bool) { return matchGroup(r.Re, line, "value") }

// mapValue applies the rule's map (exact key, else ignoring ASCII case) and default.
func mapValue(r *ValueRule, v string) string {
	if r.Map == nil {
		return strings.Clone(v)
	}
	if m, ok := r.Map[v]; ok {
		return m
	}
	for k, m := range r.Map {
		if strings.EqualFold(k, v) {
			return m
		}
	}
	if r.Default != "" {
		return r.Default
	}
	return strings.Clone(v)
}

// readPlayers reads every player item of the players line, in order.
func readPlayers(r *PlayersRule, value string) []Player {
	ni, si := r.ItemRe.SubexpIndex("name"), r.ItemRe.SubexpIndex("scope")
	var out []Player
	for _, m := range r.ItemRe.FindAllStringSubmatchIndex(value, -1) {
		if m[2*ni] < 0 || m[2*si] < 0 {
			continue
		}
		name := strings.TrimSpace(value[m[2*ni]:m[2*ni+1]])
		scope := strings.TrimSpace(value[m[2*si]:m[2*si+1]])
		if name == "" || scope == "" {
			continue
		}
		if mapped, ok := r.Map[scope]; ok {
			scope = mapped
		} else {
			scope = strings.Clone(scope)
		}
		out = append(out, Player{Name: strings.Clone(name), Scope: scope})
	}
	return out
}

// compiledScopeDims returns the dimensions of the scope rules with a compiled regex,
// sorted.
func (c *ContextRules) compiledScopeDims() []string {
	var dims []string
	for _, dim := range sortedKeys(c.Scopes) {
		if c.Scopes[dim].Re != nil {
			dims = append(dims, dim)
		}
	}
	return dims
}
