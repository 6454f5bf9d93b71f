package knowledge

import (
	"bytes"
	"encoding/json"
)

// SetFile is the file form of a knowledge set, in order: what a set or overlay JSON
// file holds. It writes deterministic, indented JSON.
type SetFile struct {
	// Taxonomy lists the extra tags; empty means no taxonomy block.
	Taxonomy []string
	// Global are the global entries.
	Global []Entry
	// Dimensions are the scope dimensions in order.
	Dimensions []DimensionFile
}

// DimensionFile is one scope dimension of a SetFile.
type DimensionFile struct {
	Name   string
	Scopes []ScopeFile
}

// ScopeFile is one scope value of a dimension, with its entries.
type ScopeFile struct {
	Value   string
	Entries []Entry
}

// ToFile returns the set in file form: dimensions in render order, scope values and
// entries in file order. Texts are written out (an entry's asset reference is
// resolved), so the result is self-contained — a starting point for an overlay.
func (s *Set) ToFile() SetFile {
	f := SetFile{Taxonomy: s.Taxonomy, Global: plainEntries(s.Global())}
	for _, dim := range s.Dimensions {
		d := DimensionFile{Name: dim}
		for _, v := range s.order[dim] {
			d.Scopes = append(d.Scopes, ScopeFile{Value: v, Entries: plainEntries(s.ScopeEntries(dim, v))})
		}
		if len(d.Scopes) > 0 {
			f.Dimensions = append(f.Dimensions, d)
		}
	}
	return f
}

func plainEntries(entries []Entry) []Entry {
	out := make([]Entry, len(entries))
	for i, e := range entries {
		e.Asset = ""
		out[i] = e
	}
	return out
}

// JSON renders the file as indented JSON (two spaces; tags on one line; no HTML
// escaping), ending with a newline.
func (f SetFile) JSON() []byte {
	var b bytes.Buffer
	b.WriteString("{")
	first := true
	member := func(indent, key string) {
		if !first {
			b.WriteString(",")
		}
		first = false
		b.WriteString("\n" + indent)
		writeJSONString(&b, key)
		b.WriteString(": ")
	}
	if len(f.Taxonomy) > 0 {
		member("  ", "taxonomy")
		b.WriteString("{\n    \"tags\": ")
		writeJSONStrings(&b, f.Taxonomy)
		b.WriteString("\n  }")
	}
	member("  ", "global")
	writeEntriesBlock(&b, f.Global, "  ")
	for _, d := range f.Dimensions {
		member("  ", d.Name)
		b.WriteString("{")
		for i, sc := range d.Scopes {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n    ")
			writeJSONString(&b, sc.Value)
			b.WriteString(": ")
			writeEntriesBlock(&b, sc.Entries, "    ")
		}
		b.WriteString("\n  }")
	}
	b.WriteString("\n}\n")
	return b.Bytes()
}

// writeEntriesBlock writes {"entries": [...]} at the given indentation.
func writeEntriesBlock(b *bytes.Buffer, entries []Entry, indent string) {
	if len(entries) == 0 {
		b.WriteString("{\n" + indent + "  \"entries\": []\n" + indent + "}")
		return
	}
	b.WriteString("{\n" + indent + "  \"entries\": [")
	in := indent + "    "
	for i, e := range entries {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n" + in + "{\n" + in + "  \"id\": ")
		writeJSONString(b, e.ID)
		b.WriteString(",\n" + in + "  \"tags\": ")
		writeJSONStrings(b, e.Tags)
		if e.Asset != "" {
			b.WriteString(",\n" + in + "  \"asset\": ")
			writeJSONString(b, e.Asset)
		} else if !e.Disabled || e.Text != "" {
			b.WriteString(",\n" + in + "  \"text\": ")
			writeJSONString(b, e.Text)
		}
		if e.Disabled {
			b.WriteString(",\n" + in + "  \"disabled\": true")
		}
		b.WriteString("\n" + in + "}")
	}
	b.WriteString("\n" + indent + "  ]\n" + indent + "}")
}

func writeJSONStrings(b *bytes.Buffer, list []string) {
	b.WriteString("[")
	for i, s := range list {
		if i > 0 {
			b.WriteString(", ")
		}
		writeJSONString(b, s)
	}
	b.WriteString("]")
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	b.Truncate(b.Len() - 1)
}
