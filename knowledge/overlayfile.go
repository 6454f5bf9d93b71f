package knowledge

import (
	"bytes"
	"fmt"
	"slices"
)

// ParseOverlayFile reads a user overlay file of base in file form, for editing: its
// entries in file order, disabled ones included, asset references kept. It checks
// the file as WithOverlay does, except what only the merge can tell (disabling an
// id the scope does not have); empty data is an empty overlay. On failure the error
// is SetErrors.
func ParseOverlayFile(data []byte, file string, base *Set) (SetFile, error) {
	if len(bytes.TrimSpace(bytes.TrimPrefix(data, utf8BOM))) == 0 {
		return SetFile{}, nil
	}
	raw, errs := parseSetFile(data, file, base.assets, base.Taxonomy, true)
	if len(errs) > 0 {
		return SetFile{}, errs
	}
	f := SetFile{Taxonomy: raw.taxonomy, Global: raw.entries[GlobalScope]}
	for _, dim := range raw.dims {
		d := DimensionFile{Name: dim}
		for _, v := range raw.values[dim] {
			d.Scopes = append(d.Scopes, ScopeFile{Value: v, Entries: raw.entries[Scope{dim, v}]})
		}
		f.Dimensions = append(f.Dimensions, d)
	}
	return f, nil
}

// Entry returns the entry with id in the scope of the file.
func (f *SetFile) Entry(sc Scope, id string) (Entry, bool) {
	for _, e := range f.scopeEntries(sc) {
		if e.ID == id {
			return e, true
		}
	}
	return Entry{}, false
}

func (f *SetFile) scopeEntries(sc Scope) []Entry {
	if sc.IsGlobal() {
		return f.Global
	}
	for _, d := range f.Dimensions {
		if d.Name != sc.Dimension {
			continue
		}
		for _, s := range d.Scopes {
			if s.Value == sc.Value {
				return s.Entries
			}
		}
	}
	return nil
}

// Put sets the entry with e's id in the scope: in place when the scope has it,
// else after the scope's entries (adding the scope and its dimension when the file
// has neither).
func (f *SetFile) Put(sc Scope, e Entry) {
	put := func(entries []Entry) []Entry {
		if i := slices.IndexFunc(entries, func(x Entry) bool { return x.ID == e.ID }); i >= 0 {
			entries[i] = e
			return entries
		}
		return append(entries, e)
	}
	if sc.IsGlobal() {
		f.Global = put(f.Global)
		return
	}
	di := slices.IndexFunc(f.Dimensions, func(d DimensionFile) bool { return d.Name == sc.Dimension })
	if di < 0 {
		f.Dimensions = append(f.Dimensions, DimensionFile{Name: sc.Dimension})
		di = len(f.Dimensions) - 1
	}
	d := &f.Dimensions[di]
	si := slices.IndexFunc(d.Scopes, func(s ScopeFile) bool { return s.Value == sc.Value })
	if si < 0 {
		d.Scopes = append(d.Scopes, ScopeFile{Value: sc.Value})
		si = len(d.Scopes) - 1
	}
	d.Scopes[si].Entries = put(d.Scopes[si].Entries)
}

// Remove deletes the entry with id from the scope and reports whether it was
// there. A scope left without entries is dropped, and so is a dimension left
// without scopes: an overlay that only mentioned them for that entry no longer
// does.
func (f *SetFile) Remove(sc Scope, id string) bool {
	del := func(entries []Entry) ([]Entry, bool) {
		i := slices.IndexFunc(entries, func(x Entry) bool { return x.ID == id })
		if i < 0 {
			return entries, false
		}
		return slices.Delete(entries, i, i+1), true
	}
	if sc.IsGlobal() {
		var ok bool
		f.Global, ok = del(f.Global)
		return ok
	}
	for di := range f.Dimensions {
		d := &f.Dimensions[di]
		if d.Name != sc.Dimension {
			continue
		}
		for si := range d.Scopes {
			if d.Scopes[si].Value != sc.Value {
				continue
			}
			var ok bool
			if d.Scopes[si].Entries, ok = del(d.Scopes[si].Entries); !ok {
				return false
			}
			if len(d.Scopes[si].Entries) == 0 {
				d.Scopes = slices.Delete(d.Scopes, si, si+1)
			}
			if len(d.Scopes) == 0 {
				f.Dimensions = slices.Delete(f.Dimensions, di, di+1)
			}
			return true
		}
	}
	return false
}

// OverlayPath returns the overlay file configured for the set, if any.
func (l *Library) OverlayPath(set string) (string, bool) {
	w := l.watchers[set]
	if w == nil {
		return "", false
	}
	return w.path, true
}

// ReloadOverlay reads the set's overlay file now instead of waiting for the
// watcher, so that a change the caller just wrote is in effect when it returns.
// The error is the one Reload returns; an unwatched set is an error.
func (l *Library) ReloadOverlay(set string) (OverlayStatus, error) {
	w := l.watchers[set]
	if w == nil {
		return OverlayStatus{}, fmt.Errorf("knowledge set %q has no overlay configured", set)
	}
	err := w.Reload()
	return w.Status(), err
}
