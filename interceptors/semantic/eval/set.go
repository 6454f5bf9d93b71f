package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/factgate/factgate/knowledge"
)

// Chunk is one labelled chunk of a set: a source text, its label and the
// proposed value that is right for it.
type Chunk struct {
	// ID names the chunk in the report (unique in its set).
	ID string
	// Category is the set's grouping ("active_combat", "planning").
	Category string
	// Label is the chunk's boolean label (the D&D pack's active_combat).
	Label bool
	// Correct is the labelled proposed value (correct_kind); it agrees with Label.
	Correct string
	// Transcript is the text the case sends as its user message.
	Transcript string
	// Note is a human remark, not used.
	Note string
	// File is the chunk's file name in its set.
	File string
}

// LoadSet reads every *.json of fsys (a set folder), in name order, as the labelled
// chunks of spec: objects with exactly id, category, transcript, note and the two
// fields spec names (its label, a boolean; its correct value, a string that agrees
// with the label and, when the answer has an enum, is one of enum). A file with an
// unknown field, a missing id, transcript or correct value, a contradiction or an
// id used twice is an error naming the file.
func LoadSet(fsys fs.FS, spec *knowledge.EvaluationSpec, enum []string) ([]Chunk, error) {
	if spec == nil {
		return nil, errors.New("no evaluation block: nothing says how the chunks are labelled")
	}
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no *.json chunk files")
	}
	slices.Sort(names)
	var out []Chunk
	seen := map[string]string{}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		c, err := decodeChunk(b, spec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		c.File = name
		switch {
		case c.ID == "":
			return nil, fmt.Errorf("%s: no id", name)
		case strings.TrimSpace(c.Transcript) == "":
			return nil, fmt.Errorf("%s (%s): empty transcript", name, c.ID)
		case c.Correct == "":
			return nil, fmt.Errorf("%s (%s): no %s", name, c.ID, spec.Correct)
		case enum != nil && !slices.Contains(enum, c.Correct):
			return nil, fmt.Errorf("%s (%s): %s %q is not one of the answer's values %v", name, c.ID, spec.Correct, c.Correct, enum)
		case spec.Agrees(c.Correct) != c.Label:
			return nil, fmt.Errorf("%s (%s): %s %q contradicts %s %v", name, c.ID, spec.Correct, c.Correct, spec.Label, c.Label)
		case seen[c.ID] != "":
			return nil, fmt.Errorf("%s: id %q is also used by %s", name, c.ID, seen[c.ID])
		}
		seen[c.ID] = name
		out = append(out, c)
	}
	return out, nil
}

// decodeChunk decodes one chunk strictly; its label and correct fields are named
// by the spec, so the object is read member by member.
func decodeChunk(b []byte, spec *knowledge.EvaluationSpec) (Chunk, error) {
	var members map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&members); err != nil {
		return Chunk{}, err
	}
	if dec.More() {
		return Chunk{}, errors.New("more than one JSON value")
	}
	var c Chunk
	fields := map[string]any{
		"id": &c.ID, "category": &c.Category, "transcript": &c.Transcript, "note": &c.Note,
		spec.Label: &c.Label, spec.Correct: &c.Correct,
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst, ok := fields[k]
		if !ok {
			return Chunk{}, fmt.Errorf("unknown field %q (a chunk has %s, %s and %s)", k, strings.Join(knowledge.ChunkFields, ", "), spec.Label, spec.Correct)
		}
		if err := json.Unmarshal(members[k], dst); err != nil {
			want := "a string"
			if k == spec.Label {
				want = "true or false"
			}
			return Chunk{}, fmt.Errorf("field %s: want %s", k, want)
		}
	}
	return c, nil
}
