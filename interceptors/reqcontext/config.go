package reqcontext

import (
	"fmt"
	"slices"
	"strings"

	"github.com/factgate/factgate/knowledge"
)

// Config is a route's request-context defaults, the route's `context` block in
// YAML. They are step 3 of the resolution order: below the client's headers and
// metadata, above what the pack's rules read from the request text. A nil or zero
// Config sets nothing at this level; the context stage runs anyway on a route with
// a pack.
//
//	context:
//	  knowledge_set: ra3-corona
//	  scopes:
//	    maps: [map_mp_2_rao1]
type Config struct {
	// KnowledgeSet is the route's knowledge set; it must be a set of the route's
	// pack. Empty: the route does not choose (extraction and defaults do). An A/B
	// variant's knowledge set replaces it.
	KnowledgeSet string `yaml:"knowledge_set"`
	// Scopes are the route's scope values per dimension ({maps: [map_mp_2_rao1]}).
	// Each dimension must be a dimension of one of the pack's sets and each value one
	// of its scope values. A dimension not listed is left to extraction.
	Scopes map[string][]string `yaml:"scopes"`
}

// validate checks the config against the pack's sets (with overlays applied, as the
// library has them at start-up) and returns it with the dimensions spelled as the
// sets spell them. Errors name the key.
func (c *Config) validate(p *knowledge.Pack, lib *knowledge.Library, dims []string) (Config, error) {
	if c == nil {
		return Config{}, nil
	}
	out := Config{KnowledgeSet: c.KnowledgeSet}
	if c.KnowledgeSet != "" && p.Set(c.KnowledgeSet) == nil {
		return out, fmt.Errorf("knowledge_set: %q is not a knowledge set of pack %s (have: %s)", c.KnowledgeSet, p.Name, strings.Join(p.SetNames(), ", "))
	}
	keys := make([]string, 0, len(c.Scopes))
	for k := range c.Scopes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		dim, ok := findFold(dims, key)
		if !ok {
			return out, fmt.Errorf("scopes.%s: pack %s has no scope dimension %q (have: %s)", key, p.Name, key, strings.Join(dims, ", "))
		}
		if out.Scopes == nil {
			out.Scopes = map[string][]string{}
		}
		if _, dup := out.Scopes[dim]; dup {
			return out, fmt.Errorf("scopes.%s: dimension %s is given twice", key, dim)
		}
		values := c.Scopes[key]
		if len(values) == 0 {
			return out, fmt.Errorf("scopes.%s: no values (remove the key to leave the dimension to extraction)", key)
		}
		for i, v := range values {
			if strings.TrimSpace(v) == "" {
				return out, fmt.Errorf("scopes.%s[%d]: empty value", key, i)
			}
			if !packHasScope(p, lib, dim, v) {
				return out, fmt.Errorf("scopes.%s[%d]: %q is not a %s value of any knowledge set of pack %s (have: %s)", key, i, v, dim, p.Name, strings.Join(packScopeValues(p, lib, dim), ", "))
			}
		}
		out.Scopes[dim] = dedupe(values)
	}
	return out, nil
}

// packDimensions returns every scope dimension the pack knows: those of its sets,
// the players' dimension and the dimensions of its scope rules, sorted.
func packDimensions(p *knowledge.Pack, lib *knowledge.Library) []string {
	var dims []string
	add := func(d string) {
		if d != "" && !slices.Contains(dims, d) {
			dims = append(dims, d)
		}
	}
	for _, name := range p.SetNames() {
		set, _ := lib.Set(name)
		if set == nil {
			set = p.Set(name)
		}
		for _, d := range set.Dimensions {
			add(d)
		}
	}
	if p.Context.Players != nil {
		add(p.Context.Players.Dimension)
	}
	for d := range p.Context.Scopes {
		add(d)
	}
	slices.Sort(dims)
	return dims
}

func packHasScope(p *knowledge.Pack, lib *knowledge.Library, dim, value string) bool {
	for _, name := range p.SetNames() {
		if set, _ := lib.Set(name); set != nil && set.HasScope(dim, value) {
			return true
		}
	}
	return false
}

func packScopeValues(p *knowledge.Pack, lib *knowledge.Library, dim string) []string {
	var out []string
	for _, name := range p.SetNames() {
		if set, _ := lib.Set(name); set != nil {
			for _, v := range set.ScopeValues(dim) {
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// findFold returns the element of list equal to s ignoring case.
func findFold(list []string, s string) (string, bool) {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return v, true
		}
	}
	return "", false
}

// dedupe returns the trimmed, non-empty values in order without repeats.
func dedupe(values []string) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
