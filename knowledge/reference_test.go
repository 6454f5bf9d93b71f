package knowledge

// The context and apply rules as they were before the line source and the line
// memo (the reference the differential tests and fuzz targets compare with). Do
// not optimise this file: it is the specification.

import (
	"regexp"
	"strings"
)

// refExtractContextTexts is ExtractContextTexts as it was: it reads each text
// whole, with no line memo.
func refExtractContextTexts(p *Pack, texts []string) Extracted {
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
				if v, ok := refMatchValue(setRule, line); ok {
					ex.KnowledgeSet, ex.SetMatched = refMapValue(setRule, v), true
					pending--
				}
			}
			if players != nil && ex.Players == nil && players.start.admits(line) {
				if v, ok := refMatchGroup(players.Re, line, "value"); ok {
					ex.Players = refReadPlayers(players, v)
					if ex.Players != nil {
						for _, pl := range ex.Players {
							refAddScope(&ex, players.Dimension, pl.Scope)
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
				if v, ok := refMatchValue(&r, line); ok {
					refAddScope(&ex, dim, refMapValue(&r, v))
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
				refAddScope(&ex, dim, d)
			}
		}
	}
	return ex
}

func refAddScope(ex *Extracted, dim, value string) {
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

// refMatchGroup returns the named group of the regex's first match in line.
func refMatchGroup(re *regexp.Regexp, line, group string) (string, bool) {
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

func refMatchValue(r *ValueRule, line string) (string, bool) {
	return refMatchGroup(r.Re, line, "value")
}

// refMapValue applies the rule's map (exact key, else ignoring ASCII case) and default.
func refMapValue(r *ValueRule, v string) string {
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

// refReadPlayers reads every player item of the players line, in order.
func refReadPlayers(r *PlayersRule, value string) []Player {
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

// refApplies is (*Pack).Applies as it was: it reads in.UserTexts (never
// in.Heads), with no line memo.
func refApplies(p *Pack, in ApplyInput) Applicability {
	var a Applicability
	rules := p.ApplyRules
	switch {
	case rules == nil:
		a.Domain, a.Reason = true, "pack "+p.Name+" applies to every request"
	case rules.Facts && p.Facts != nil && refHasOperationLine(p, in.UserTexts, rules.opStart):
		a.Domain, a.Reason = true, "a user message holds an operation the pack's fact rules read"
	case rules.UserLineRe != nil && refAnyLine(p, in.UserTexts, func(line string) bool {
		return rules.userLineStart.admits(line) && rules.UserLineRe.MatchString(line)
	}):
		a.Domain, a.Reason = true, "a user message has a line the pack's user_line rule matches"
	case rules.Marker && p.Claims != nil && in.ClientMentions != nil && in.ClientMentions(p.Claims.Marker):
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

// refHasOperationLine reports whether a line of the texts is an operation; start,
// when not nil, skips lines no operation rule can match.
func refHasOperationLine(p *Pack, texts []string, start *lineStart) bool {
	ops := p.Facts.Ops
	return refAnyLine(p, texts, func(line string) bool {
		if !start.admits(line) {
			return false
		}
		for i := range ops {
			if re := ops[i].Re; re != nil && re.MatchString(line) {
				return true
			}
		}
		return false
	})
}

// refAnyLine reports whether match holds for a line of the texts, within the context
// rules' bounds.
func refAnyLine(p *Pack, texts []string, match func(string) bool) bool {
	maxLines, maxBytes := p.Context.MaxLines, p.Context.MaxBytes
	if maxLines <= 0 {
		maxLines = DefaultContextMaxLines
	}
	if maxBytes <= 0 {
		maxBytes = DefaultContextMaxBytes
	}
	for _, text := range texts {
		text = strings.TrimPrefix(text, "\uFEFF")
		if len(text) > maxBytes {
			text = text[:maxBytes]
		}
		for n := 0; n < maxLines && text != ""; n++ {
			var line string
			if i := strings.IndexByte(text, '\n'); i >= 0 {
				line, text = text[:i], text[i+1:]
			} else {
				line, text = text, ""
			}
			if match(strings.TrimSuffix(line, "\r")) {
				return true
			}
		}
	}
	return false
}
