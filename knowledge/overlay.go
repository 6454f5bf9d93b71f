package knowledge

import (
	"bytes"
	"slices"
)

// WithOverlay returns the effective set: s with a user overlay file applied. The
// overlay has the set format; in each scope, an entry whose id exists overrides the
// built-in entry in place, a new id is added after the scope's entries, and
// "disabled": true removes the entry (disabling an id the scope does not have is an
// error, so a typo does not go unnoticed). New scope values and dimensions are
// added; the overlay's taxonomy block adds tags. Entries may use the pack assets
// the set was loaded with.
//
// The result is a new Set (s is unchanged) with Version 0; the caller that tracks
// reloads sets Version before publishing it. On failure the error is SetErrors.
func (s *Set) WithOverlay(data []byte, file string) (*Set, error) {
	raw, errs := parseSetFile(data, file, s.assets, s.Taxonomy, true)
	if len(errs) > 0 {
		return nil, errs
	}
	out := &Set{
		Name:       s.Name,
		File:       s.File,
		Dimensions: dimensionOrder(s.Dimensions, raw.dims),
		Taxonomy:   slices.Clone(s.Taxonomy),
		Title:      s.Title,
		Headings:   s.Headings,
		Language:   s.Language,
		assets:     s.assets,
	}
	for _, t := range raw.taxonomy {
		if !slices.Contains(out.Taxonomy, t) {
			out.Taxonomy = append(out.Taxonomy, t)
		}
	}
	order := map[string][]string{}
	for dim, values := range s.order {
		order[dim] = slices.Clone(values)
	}
	merged := map[Scope][]Entry{}
	for sc, ix := range s.scopes {
		merged[sc] = slices.Clone(ix.entries)
	}
	p := &setParser{file: file, data: bytes.TrimPrefix(data, utf8BOM)}
	apply := func(sc Scope) {
		for i, e := range raw.entries[sc] {
			cur := merged[sc]
			at := slices.IndexFunc(cur, func(b Entry) bool { return b.ID == e.ID })
			switch {
			case e.Disabled && at < 0:
				p.fail(raw.offsets[sc][i], sc.String(), e.ID, "disabled", "disables an entry that scope %s does not have", sc)
			case e.Disabled:
				merged[sc] = slices.Delete(cur, at, at+1)
			case at >= 0:
				cur[at] = e
			default:
				merged[sc] = append(cur, e)
			}
		}
	}
	apply(GlobalScope)
	for _, dim := range raw.dims {
		for _, v := range raw.values[dim] {
			sc := Scope{dim, v}
			if !slices.Contains(order[dim], v) {
				order[dim] = append(order[dim], v)
			}
			apply(sc)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	global := merged[GlobalScope]
	delete(merged, GlobalScope)
	out.build(global, order, merged)
	return out, nil
}
