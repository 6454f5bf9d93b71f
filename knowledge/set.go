package knowledge

import (
	"slices"
	"sync/atomic"
)

// Scope says where an entry applies: a dimension and one of its values
// ("factions", "盟军"). Scope comes from an entry's path in the set file, never from
// the entry. The zero Scope is the global scope.
type Scope struct {
	Dimension string
	Value     string
}

// GlobalScope is the scope of the set's global entries.
var GlobalScope = Scope{}

// IsGlobal reports whether s is the global scope.
func (s Scope) IsGlobal() bool { return s.Dimension == "" }

// String renders the scope as in error messages: "global" or "factions/盟军".
func (s Scope) String() string {
	if s.IsGlobal() {
		return "global"
	}
	return s.Dimension + "/" + s.Value
}

// Entry is one piece of knowledge: a unit, a rule, a map note.
type Entry struct {
	// ID identifies the entry within its scope (RA3: the asset name "AlliedMCV").
	ID string `json:"id"`
	// Tags come from the taxonomy; validators query entries by them.
	Tags []string `json:"tags"`
	// Text is markdown, rendered into the prompt as is.
	Text string `json:"text"`
	// Asset names a pack asset whose text became Text at load ("combat_policy");
	// empty when the file gave the text itself.
	Asset string `json:"asset,omitempty"`
	// Disabled, in an overlay, removes the entry with the same id from the same
	// scope. Loaded sets never contain disabled entries.
	Disabled bool `json:"disabled,omitempty"`
}

// HasTag reports whether the entry carries tag.
func (e *Entry) HasTag(tag string) bool { return slices.Contains(e.Tags, tag) }

// ScopedEntry is an entry with the scope it belongs to.
type ScopedEntry struct {
	Scope Scope
	Entry Entry
}

// Scopes are the scope values a request selects, per dimension, in the request's
// order (factions in player order). A nil or empty Scopes selects only the global
// entries.
type Scopes map[string][]string

// Set is a loaded knowledge set: self-contained knowledge for one domain variant
// (the mod: "ra3", "ra3-corona", "dnd"), with indexes for the validators' queries
// built at load time.
//
// A Set is immutable once loaded and safe for concurrent use. Slices returned by its
// methods are shared with the set: callers must not modify them.
type Set struct {
	// Name is the set's name ("ra3-corona").
	Name string
	// File is where the set was loaded from (for messages).
	File string
	// Dimensions is the render order of the scope dimensions after global: the
	// declared order, then dimensions present in the file but not declared,
	// alphabetically.
	Dimensions []string
	// Taxonomy lists the extra tags the set declares in its taxonomy block.
	Taxonomy []string
	// Title, when not empty, is rendered as the prompt's first heading.
	Title string
	// Headings are the section headings: "global" and one per dimension, where
	// "{value}" stands for the scope value ("阵营：{value}"). Missing headings fall
	// back to the language's defaults.
	Headings map[string]string
	// Language is the language of the texts ("zh", "en"); it picks default headings.
	Language string
	// Version is 0 for a set as loaded and counts successful overlay reloads for an
	// effective set (built-in + overlay).
	Version uint64

	serial uint64              // unique per Set value, keys the render cache
	assets map[string]string   // pack assets entries may refer to
	order  map[string][]string // dimension -> scope values in file order
	scopes map[Scope]*scopeIndex
	byTag  map[string][]ScopedEntry
	byID   map[string][]ScopedEntry
}

type scopeIndex struct {
	entries []Entry
	byID    map[string]int
	assets  map[string][]string // tag -> ids of the entries carrying it, in order
}

var setSerial atomic.Uint64

// build indexes the set. It is called once, before the set is published.
func (s *Set) build(global []Entry, order map[string][]string, scoped map[Scope][]Entry) {
	s.serial = setSerial.Add(1)
	s.order = order
	s.scopes = make(map[Scope]*scopeIndex, len(scoped)+1)
	s.byTag = map[string][]ScopedEntry{}
	s.byID = map[string][]ScopedEntry{}
	add := func(sc Scope, entries []Entry) {
		ix := &scopeIndex{entries: entries, byID: make(map[string]int, len(entries)), assets: map[string][]string{}}
		for i := range entries {
			e := entries[i]
			ix.byID[e.ID] = i
			se := ScopedEntry{Scope: sc, Entry: e}
			s.byID[e.ID] = append(s.byID[e.ID], se)
			for _, t := range e.Tags {
				ix.assets[t] = append(ix.assets[t], e.ID)
				s.byTag[t] = append(s.byTag[t], se)
			}
		}
		s.scopes[sc] = ix
	}
	add(GlobalScope, global)
	for _, dim := range s.Dimensions {
		for _, v := range order[dim] {
			sc := Scope{dim, v}
			add(sc, scoped[sc])
		}
	}
}

// Global returns the global entries in file order.
func (s *Set) Global() []Entry { return s.scopes[GlobalScope].entries }

// ScopeEntries returns the entries of one scope in file order (nil for an unknown
// scope). ScopeEntries("", "") returns the global entries.
func (s *Set) ScopeEntries(dim, value string) []Entry {
	if ix := s.scopes[Scope{dim, value}]; ix != nil {
		return ix.entries
	}
	return nil
}

// ScopeValues returns the values of a dimension in file order ("盟军", "苏联",
// "帝国"); nil for an unknown dimension.
func (s *Set) ScopeValues(dim string) []string { return s.order[dim] }

// HasScope reports whether the set has the scope (the global scope always exists).
func (s *Set) HasScope(dim, value string) bool { return s.scopes[Scope{dim, value}] != nil }

// ScopeView is one scope of a set, for asking it several questions in a row
// (a validator's rules about one claim): its lookups skip the scope's. The zero
// ScopeView is a scope the set does not have: it has no entries.
type ScopeView struct{ ix *scopeIndex }

// View returns the scope (dim "" is the global scope); a nil Set has none.
func (s *Set) View(dim, value string) ScopeView {
	if s == nil {
		return ScopeView{}
	}
	return ScopeView{s.scopes[Scope{dim, value}]}
}

// Exists reports whether the set has the scope (Set.HasScope).
func (v ScopeView) Exists() bool { return v.ix != nil }

// Entry returns the scope's entry with id, nil when it has none (Set.Has). The
// entry is shared with the set: callers must not modify it.
func (v ScopeView) Entry(id string) *Entry {
	if v.ix == nil {
		return nil
	}
	i, ok := v.ix.byID[id]
	if !ok {
		return nil
	}
	return &v.ix.entries[i]
}

// AssetsWithTag is Set.AssetsWithTag in the scope.
func (v ScopeView) AssetsWithTag(tag string) []string {
	if v.ix == nil {
		return nil
	}
	return v.ix.assets[tag]
}

// WithTag returns every entry carrying tag, in render order: global first, then
// each dimension in order, its values in file order, entries in file order.
func (s *Set) WithTag(tag string) []ScopedEntry { return s.byTag[tag] }

// Entry returns the entry with id in one scope (dim "" is the global scope).
func (s *Set) Entry(dim, value, id string) (Entry, bool) {
	ix := s.scopes[Scope{dim, value}]
	if ix == nil {
		return Entry{}, false
	}
	i, ok := ix.byID[id]
	if !ok {
		return Entry{}, false
	}
	return ix.entries[i], true
}

// Lookup returns every entry with id, in render order. Ids are unique within a
// scope, not across scopes.
func (s *Set) Lookup(id string) []ScopedEntry { return s.byID[id] }

// Has reports whether the scope has an entry with id.
func (s *Set) Has(dim, value, id string) bool {
	ix := s.scopes[Scope{dim, value}]
	if ix == nil {
		return false
	}
	_, ok := ix.byID[id]
	return ok
}

// HasTag reports whether the entry with id in the scope carries tag (false when
// the scope or the entry does not exist).
func (s *Set) HasTag(dim, value, id, tag string) bool {
	ix := s.scopes[Scope{dim, value}]
	if ix == nil {
		return false
	}
	i, ok := ix.byID[id]
	return ok && ix.entries[i].HasTag(tag)
}

// AssetsWithTag returns the ids of the entries of one scope that carry tag, in file
// order: which assets of 盟军 carry specialPower:SpecialPower_UnpackReplaceSelf ->
// [AlliedMiner AlliedMCV] in the built-in set. Nil when none does or the scope does not exist.
func (s *Set) AssetsWithTag(dim, value, tag string) []string {
	ix := s.scopes[Scope{dim, value}]
	if ix == nil {
		return nil
	}
	return ix.assets[tag]
}

// Entries returns the entries the scopes select, in render order: global, then each
// dimension in the set's order with its values in the order given (duplicates and
// values the set does not know are skipped).
func (s *Set) Entries(scopes Scopes) []ScopedEntry {
	var out []ScopedEntry
	s.eachScope(scopes, func(sc Scope, entries []Entry) {
		for _, e := range entries {
			out = append(out, ScopedEntry{Scope: sc, Entry: e})
		}
	})
	return out
}

// eachScope calls f for every selected scope that exists, in render order.
func (s *Set) eachScope(scopes Scopes, f func(Scope, []Entry)) {
	f(GlobalScope, s.Global())
	for _, dim := range s.Dimensions {
		values := scopes[dim]
		for i, v := range values {
			if slices.Contains(values[:i], v) {
				continue
			}
			if ix := s.scopes[Scope{dim, v}]; ix != nil {
				f(Scope{dim, v}, ix.entries)
			}
		}
	}
}
