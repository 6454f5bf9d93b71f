package knowledge

import (
	"regexp"
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
	var scopeDone []bool
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
	maxLines, maxBytes := c.MaxLines, c.MaxBytes
	if maxLines <= 0 {
		maxLines = DefaultContextMaxLines
	}
	if maxBytes <= 0 {
		maxBytes = DefaultContextMaxBytes
	}

	for _, text := range texts {
		if pending == 0 {
			break
		}
		text = strings.TrimPrefix(text, "\uFEFF")
		if len(text) > maxBytes {
			text = text[:maxBytes]
		}
		for n := 0; n < maxLines && pending > 0 && text != ""; n++ {
			var line string
			if i := strings.IndexByte(text, '\n'); i >= 0 {
				line, text = text[:i], text[i+1:]
			} else {
				line, text = text, ""
			}
			line = strings.TrimSuffix(line, "\r")
			if setRule != nil && !ex.SetMatched && setRule.start.admits(line) {
				if v, ok := matchValue(setRule, line); ok {
					ex.KnowledgeSet, ex.SetMatched = mapValue(setRule, v), true
					pending--
				}
			}
			if players != nil && ex.Players == nil && players.start.admits(line) {
				if v, ok := matchGroup(players.Re, line, "value"); ok {
					ex.Players = readPlayers(players, v)
					if ex.Players != nil {
						for _, pl := range ex.Players {
							ex.addScope(players.Dimension, pl.Scope)
						}
						pending--
					}
				}
			}
			for i, dim := range dims {
				if scopeDone[i] {
					continue
				}
				r := c.Scopes[dim]
				if !r.start.admits(line) {
					continue
				}
				if v, ok := matchValue(&r, line); ok {
					ex.addScope(dim, mapValue(&r, v))
					scopeDone[i] = true
					pending--
				}
			}
		}
	}
	if setRule != nil && !ex.SetMatched {
		ex.KnowledgeSet = setRule.Default
	}
	for i, dim := range dims {
		if !scopeDone[i] {
			if d := c.Scopes[dim].Default; d != "" {
				ex.addScope(dim, d)
			}
		}
	}
	return ex
}

func (ex *Extracted) addScope(dim, value string) {
	if value == "" {
		return
	}
	if ex.Scopes == nil {
		ex.Scopes = Scopes{}
	}
	for _, v := range ex.Scopes[dim] {
		if v == value {
			return
		}
	}
	ex.Scopes[dim] = append(ex.Scopes[dim], value)
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
