package knowledge

import (
	"strings"
)

// Default section headings per language; "{value}" stands for the scope value and
// "{dimension}" for the dimension's name.
var defaultHeadings = map[string]map[string]string{
	"zh": {"global": "通用知识", "*": "{dimension}：{value}"},
	"en": {"global": "General", "*": "{dimension}: {value}"},
}

// heading returns the section heading of a scope.
func (s *Set) heading(sc Scope) string {
	key := "global"
	if !sc.IsGlobal() {
		key = sc.Dimension
	}
	h, ok := s.Headings[key]
	if !ok {
		defs := defaultHeadings[s.Language]
		if defs == nil {
			defs = defaultHeadings["en"]
		}
		if h, ok = defs[key]; !ok {
			h = defs["*"]
		}
	}
	return strings.NewReplacer("{value}", sc.Value, "{dimension}", sc.Dimension).Replace(h)
}

// Render renders the knowledge the scopes select as markdown: the set's title (when
// it has one), the global entries, then each dimension in the set's order with its
// scope values in the order the request gives them (factions in player order, then
// maps). Each scope with entries gets a "## " heading; entries follow in file order,
// each text as is, separated by a blank line. Scope values the set does not know and
// repeated values are skipped. The output is deterministic byte for byte.
func Render(set *Set, scopes Scopes) string {
	var b strings.Builder
	b.Grow(set.renderSizeHint(scopes))
	if set.Title != "" {
		b.WriteString("# ")
		b.WriteString(set.Title)
		b.WriteString("\n\n")
	}
	first := true
	set.eachScope(scopes, func(sc Scope, entries []Entry) {
		if len(entries) == 0 {
			return
		}
		if !first {
			b.WriteByte('\n')
		}
		first = false
		b.WriteString("## ")
		b.WriteString(set.heading(sc))
		b.WriteString("\n\n")
		for i, e := range entries {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(e.Text)
			if !strings.HasSuffix(e.Text, "\n") {
				b.WriteByte('\n')
			}
		}
	})
	return b.String()
}

func (s *Set) renderSizeHint(scopes Scopes) int {
	n := len(s.Title) + 8
	s.eachScope(scopes, func(sc Scope, entries []Entry) {
		n += 64
		for _, e := range entries {
			n += len(e.Text) + 2
		}
	})
	return n
}
