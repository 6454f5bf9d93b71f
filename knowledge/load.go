package knowledge

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// SetError is one problem in a knowledge set or overlay file. It names the place:
// file, line and column, scope, entry id, field, and the offending value.
type SetError struct {
	// File is the file's name as given to the loader.
	File string
	// Line and Column locate the problem (1-based; the column counts characters).
	// Zero when the problem has no single place.
	Line, Column int
	// Scope is "global", "factions/盟军", or "" outside any scope.
	Scope string
	// Entry is the entry's id ("" when the problem is not inside an entry, or the
	// entry has no id).
	Entry string
	// Field is the JSON path inside the entry or block ("tags[2]").
	Field string
	// Problem says what is wrong, quoting the offending value.
	Problem string
}

// Error renders "ra3.json:12:7: factions/盟军: entry \"AlliedMCV\": tags[2]: unknown tag \"amphibous\"".
func (e *SetError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Scope != "" {
		b.WriteString(e.Scope)
		b.WriteString(": ")
	}
	if e.Entry != "" {
		fmt.Fprintf(&b, "entry %q: ", e.Entry)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// SetErrors is every problem found in one file, in file order. The loaders return
// it (as error) so that a linter can print them all.
type SetErrors []*SetError

// Error renders one problem per line.
func (l SetErrors) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes the individual problems to errors.Is and errors.As.
func (l SetErrors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// SetOptions configure how a set file is read.
type SetOptions struct {
	// Name is the set's name.
	Name string
	// Dimensions is the declared render order of the scope dimensions. Nil: every
	// dimension of the file, alphabetically.
	Dimensions []string
	// Assets are the texts an entry may take with "asset": name -> text. Nil: no
	// entry may use "asset".
	Assets map[string]string
	// Title, Headings and Language are copied to the Set (see Set).
	Title    string
	Headings map[string]string
	Language string
}

// LoadSet reads a knowledge set file (ADR 0002's JSON format) with the declared
// dimension order. file names the file in errors. On failure the error is SetErrors
// with every problem of the file.
func LoadSet(name string, data []byte, file string, dims []string) (*Set, error) {
	return ParseSet(data, file, SetOptions{Name: name, Dimensions: dims})
}

// ParseSet reads a knowledge set file with options. The format: "global.entries",
// an optional "taxonomy.tags" block of extra tags, and every other top-level key a
// scope dimension whose members are scope values with "entries". On failure the
// error is SetErrors with every problem of the file.
func ParseSet(data []byte, file string, opt SetOptions) (*Set, error) {
	raw, errs := parseSetFile(data, file, opt.Assets, nil, false)
	if len(errs) > 0 {
		return nil, errs
	}
	s := &Set{
		Name:       opt.Name,
		File:       file,
		Dimensions: dimensionOrder(opt.Dimensions, raw.dims),
		Taxonomy:   raw.taxonomy,
		Title:      opt.Title,
		Headings:   opt.Headings,
		Language:   opt.Language,
		assets:     opt.Assets,
	}
	order := map[string][]string{}
	scoped := map[Scope][]Entry{}
	for _, dim := range raw.dims {
		order[dim] = raw.values[dim]
	}
	for sc, entries := range raw.entries {
		if !sc.IsGlobal() {
			scoped[sc] = entries
		}
	}
	s.build(raw.entries[GlobalScope], order, scoped)
	return s, nil
}

// dimensionOrder is the declared dimensions, then the file's undeclared ones
// alphabetically.
func dimensionOrder(declared, inFile []string) []string {
	out := slices.Clone(declared)
	var extra []string
	for _, d := range inFile {
		if !slices.Contains(out, d) && !slices.Contains(extra, d) {
			extra = append(extra, d)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}

// rawSet is a parsed set or overlay file before indexing.
type rawSet struct {
	taxonomy []string
	dims     []string            // dimensions in file order
	values   map[string][]string // dimension -> values in file order
	entries  map[Scope][]Entry   // including disabled entries of overlays
	offsets  map[Scope][]int64   // where each entry starts, parallel to entries
}

// setParser collects every problem of one file.
type setParser struct {
	file   string
	data   []byte
	assets map[string]string
	known  func(tag string) bool
	errs   SetErrors
	// overlay files may disable entries (then text and tags are not required).
	overlay bool
}

func (p *setParser) fail(off int64, scope, entry, field, format string, args ...any) {
	line, col := lineColumn(p.data, off)
	p.errs = append(p.errs, &SetError{
		File: p.file, Line: line, Column: col,
		Scope: scope, Entry: entry, Field: field,
		Problem: fmt.Sprintf(format, args...),
	})
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// entryFields are the fields an entry may have (configs/knowledge.schema.json lists
// the same).
var entryFields = []string{"id", "tags", "text", "asset", "disabled"}

// parseSetFile parses and checks a set or overlay file. baseTags, when not nil,
// are further known tags (an overlay's base set taxonomy).
func parseSetFile(data []byte, file string, assets map[string]string, baseTags []string, overlay bool) (*rawSet, SetErrors) {
	data = bytes.TrimPrefix(data, utf8BOM)
	p := &setParser{file: file, data: data, assets: assets, overlay: overlay}
	root, err := parseJSONTree(data)
	if err != nil {
		var se *jsonSyntaxError
		if errors.As(err, &se) {
			p.fail(se.off, "", "", "", "malformed JSON: %s", se.msg)
		} else {
			p.fail(0, "", "", "", "malformed JSON: %v", err)
		}
		return nil, p.errs
	}
	if root.kind != jsonObject {
		p.fail(root.off, "", "", "", "a knowledge set must be a JSON object, got %s", root.kind)
		return nil, p.errs
	}
	raw := &rawSet{values: map[string][]string{}, entries: map[Scope][]Entry{}, offsets: map[Scope][]int64{}}

	// The taxonomy block may come anywhere in the file; read it first.
	extra := map[string]bool{}
	seenTop := map[string]bool{}
	for _, m := range root.members {
		if m.key != "taxonomy" {
			continue
		}
		if seenTop[m.key] {
			continue // reported below
		}
		seenTop[m.key] = true
		raw.taxonomy = p.taxonomy(m.val)
		for _, t := range raw.taxonomy {
			extra[t] = true
		}
	}
	for _, t := range baseTags {
		extra[t] = true
	}
	p.known = func(tag string) bool { return IsBuiltinTag(tag) || extra[tag] }

	seenTop = map[string]bool{}
	for _, m := range root.members {
		if seenTop[m.key] {
			p.fail(m.keyOff, "", "", "", "duplicate top-level key %q", m.key)
			continue
		}
		seenTop[m.key] = true
		switch m.key {
		case "taxonomy":
			// read above
		case "global":
			raw.entries[GlobalScope], raw.offsets[GlobalScope] = p.scopeBlock(m.val, GlobalScope)
		case "":
			p.fail(m.keyOff, "", "", "", "empty dimension name")
		default:
			p.dimension(raw, m)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return raw, nil
}

func (p *setParser) taxonomy(v *jsonValue) []string {
	if v.kind != jsonObject {
		p.fail(v.off, "", "", "taxonomy", "must be an object like {\"tags\": [\"policy\"]}, got %s", v.kind)
		return nil
	}
	var tags []string
	for _, m := range v.members {
		if m.key != "tags" {
			p.fail(m.keyOff, "", "", "taxonomy", "unknown key %q (want \"tags\")", m.key)
			continue
		}
		if m.val.kind != jsonArray {
			p.fail(m.val.off, "", "", "taxonomy.tags", "must be an array of strings, got %s", m.val.kind)
			continue
		}
		for i, it := range m.val.items {
			field := fmt.Sprintf("taxonomy.tags[%d]", i)
			if it.kind != jsonString {
				p.fail(it.off, "", "", field, "must be a string, got %s", it.kind)
				continue
			}
			if why := validExtraTag(it.str); why != "" {
				p.fail(it.off, "", "", field, "%s: %q", why, it.str)
				continue
			}
			if slices.Contains(tags, it.str) {
				p.fail(it.off, "", "", field, "duplicate tag %q", it.str)
				continue
			}
			tags = append(tags, it.str)
		}
	}
	return tags
}

func (p *setParser) dimension(raw *rawSet, m jsonMember) {
	dim := m.key
	if m.val.kind != jsonObject {
		p.fail(m.val.off, "", "", dim, "a scope dimension must be an object of scope values (like {\"盟军\": {\"entries\": [...]}}), got %s", m.val.kind)
		return
	}
	raw.dims = append(raw.dims, dim)
	seen := map[string]bool{}
	for _, sm := range m.val.members {
		sc := Scope{dim, sm.key}
		if sm.key == "" {
			p.fail(sm.keyOff, "", "", dim, "empty scope value")
			continue
		}
		if seen[sm.key] {
			p.fail(sm.keyOff, sc.String(), "", "", "duplicate scope %q in %s", sm.key, dim)
			continue
		}
		seen[sm.key] = true
		raw.values[dim] = append(raw.values[dim], sm.key)
		raw.entries[sc], raw.offsets[sc] = p.scopeBlock(sm.val, sc)
	}
}

// scopeBlock reads {"entries": [...]} of one scope.
func (p *setParser) scopeBlock(v *jsonValue, sc Scope) ([]Entry, []int64) {
	if v.kind != jsonObject {
		p.fail(v.off, sc.String(), "", "", "a scope must be an object like {\"entries\": [...]}, got %s", v.kind)
		return nil, nil
	}
	var entries []Entry
	var offsets []int64
	ids := map[string]bool{}
	for _, m := range v.members {
		if m.key != "entries" {
			p.fail(m.keyOff, sc.String(), "", "", "unknown key %q (a scope holds only \"entries\")", m.key)
			continue
		}
		if m.val.kind != jsonArray {
			p.fail(m.val.off, sc.String(), "", "entries", "must be an array of entries, got %s", m.val.kind)
			continue
		}
		for i, it := range m.val.items {
			e, ok := p.entry(it, sc, i)
			if !ok {
				continue
			}
			if ids[e.ID] {
				p.fail(it.off, sc.String(), e.ID, "id", "duplicate id %q in scope %s", e.ID, sc)
				continue
			}
			ids[e.ID] = true
			entries = append(entries, e)
			offsets = append(offsets, it.off)
		}
	}
	return entries, offsets
}

// entry reads one entry; ok is false when it has problems (already reported).
func (p *setParser) entry(v *jsonValue, sc Scope, index int) (Entry, bool) {
	scope := sc.String()
	if v.kind != jsonObject {
		p.fail(v.off, scope, "", "entries["+strconv.Itoa(index)+"]", "an entry must be an object with id, tags and text, got %s", v.kind)
		return Entry{}, false
	}
	before := len(p.errs)
	var e Entry
	var hasText, hasID, badText bool
	var textOff, assetOff int64 = v.off, v.off
	// The id first, so that every later problem names the entry.
	for _, m := range v.members {
		if m.key == "id" && m.val.kind == jsonString {
			e.ID = m.val.str
		}
	}
	where := e.ID
	for _, m := range v.members {
		switch m.key {
		case "id":
			hasID = true
			if m.val.kind != jsonString {
				p.fail(m.val.off, scope, "", fmt.Sprintf("entries[%d].id", index), "must be a string, got %s", m.val.kind)
			} else if strings.TrimSpace(m.val.str) == "" {
				p.fail(m.val.off, scope, "", fmt.Sprintf("entries[%d].id", index), "empty id")
			}
		case "tags":
			if m.val.kind != jsonArray {
				p.fail(m.val.off, scope, where, "tags", "must be an array of strings, got %s", m.val.kind)
				continue
			}
			for i, t := range m.val.items {
				field := fmt.Sprintf("tags[%d]", i)
				switch {
				case t.kind != jsonString:
					p.fail(t.off, scope, where, field, "must be a string, got %s", t.kind)
				case !p.known(t.str):
					p.fail(t.off, scope, where, field, "unknown tag %q%s", t.str, tagHint(t.str))
				case slices.Contains(e.Tags, t.str):
					p.fail(t.off, scope, where, field, "duplicate tag %q", t.str)
				default:
					e.Tags = append(e.Tags, t.str)
				}
			}
		case "text":
			if m.val.kind != jsonString {
				p.fail(m.val.off, scope, where, "text", "must be a string, got %s", m.val.kind)
				badText = true
				continue
			}
			hasText, textOff = true, m.val.off
			e.Text = m.val.str
		case "asset":
			if m.val.kind != jsonString {
				p.fail(m.val.off, scope, where, "asset", "must be a string naming a pack asset, got %s", m.val.kind)
				continue
			}
			assetOff = m.val.off
			e.Asset = m.val.str
		case "disabled":
			if m.val.kind != jsonBool {
				p.fail(m.val.off, scope, where, "disabled", "must be true or false, got %s", m.val.kind)
				continue
			}
			e.Disabled = m.val.boolean
			if e.Disabled && !p.overlay {
				p.fail(m.val.off, scope, where, "disabled", "\"disabled\": true only makes sense in an overlay file")
			}
		default:
			p.fail(m.keyOff, scope, where, "", "unknown field %q (an entry has %s)", m.key, strings.Join(entryFields, ", "))
		}
	}
	if !hasID {
		p.fail(v.off, scope, "", fmt.Sprintf("entries[%d]", index), "empty id: the entry has no \"id\"")
	}
	if e.Tags == nil {
		e.Tags = []string{}
	}
	if !e.Disabled {
		switch {
		case e.Asset != "" && hasText:
			p.fail(textOff, scope, where, "text", "an entry takes its text from \"text\" or from \"asset\" %q, not both", e.Asset)
		case e.Asset != "":
			text, ok := p.assets[e.Asset]
			if !ok {
				p.fail(assetOff, scope, where, "asset", "unknown asset %q%s", e.Asset, assetHint(p.assets))
			} else {
				e.Text = text
			}
		case strings.TrimSpace(e.Text) == "" && !badText:
			p.fail(textOff, scope, where, "text", "empty text")
		}
		if e.Asset != "" && strings.TrimSpace(e.Text) == "" && len(p.errs) == before {
			p.fail(assetOff, scope, where, "asset", "asset %q is empty", e.Asset)
		}
	}
	return e, len(p.errs) == before
}

func tagHint(tag string) string {
	if strings.HasPrefix(strings.ToLower(tag), "specialpower:") && !strings.HasPrefix(tag, SpecialPowerPrefix) {
		return " (the family is spelled \"specialPower:<Name>\")"
	}
	if tag == "specialPower:" {
		return " (specialPower: needs a power name)"
	}
	return " (declare extra tags in the set's \"taxonomy\": {\"tags\": [...]})"
}

func assetHint(assets map[string]string) string {
	if len(assets) == 0 {
		return " (this file is not loaded with a pack's assets)"
	}
	names := make([]string, 0, len(assets))
	for n := range assets {
		names = append(names, n)
	}
	sort.Strings(names)
	return " (the pack's assets: " + strings.Join(names, ", ") + ")"
}
