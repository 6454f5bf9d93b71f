package knowledge

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestLoadSetErrorsNameThePlace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		// want are substrings of the single error expected, in order.
		want []string
	}{
		{
			name: "unknown tag",
			data: `{"factions": {"盟军": {"entries": [
  {"id": "AlliedMCV", "tags": ["vehicle", "amphibous"], "text": "x"}
]}}}`,
			want: []string{"set.json:2:43:", "factions/盟军", `entry "AlliedMCV"`, "tags[1]", `unknown tag "amphibous"`},
		},
		{
			name: "misspelt specialPower family",
			data: `{"global": {"entries": [{"id": "a", "tags": ["specialpower:X"], "text": "x"}]}}`,
			want: []string{"global", `entry "a"`, `unknown tag "specialpower:X"`, `spelled "specialPower:<Name>"`},
		},
		{
			name: "specialPower without a name",
			data: `{"global": {"entries": [{"id": "a", "tags": ["specialPower:"], "text": "x"}]}}`,
			want: []string{`unknown tag "specialPower:"`, "needs a power name"},
		},
		{
			name: "duplicate id in one scope",
			data: `{"maps": {"m1": {"entries": [
  {"id": "overview", "tags": [], "text": "a"},
  {"id": "overview", "tags": [], "text": "b"}
]}}}`,
			want: []string{"set.json:3:3:", "maps/m1", `entry "overview"`, `duplicate id "overview" in scope maps/m1`},
		},
		{
			name: "empty text",
			data: `{"global": {"entries": [{"id": "rule-1", "tags": ["rule"], "text": "  \n"}]}}`,
			want: []string{"set.json:1:68:", "global", `entry "rule-1"`, "text: empty text"},
		},
		{
			name: "missing text",
			data: `{"global": {"entries": [{"id": "rule-1", "tags": ["rule"]}]}}`,
			want: []string{"global", `entry "rule-1"`, "empty text"},
		},
		{
			name: "empty id",
			data: `{"global": {"entries": [{"id": "", "tags": ["rule"], "text": "x"}]}}`,
			want: []string{"global", "entries[0].id", "empty id"},
		},
		{
			name: "missing id",
			data: `{"global": {"entries": [{"tags": ["rule"], "text": "x"}]}}`,
			want: []string{"global", "entries[0]", "empty id"},
		},
		{
			name: "tags not an array",
			data: `{"global": {"entries": [{"id": "a", "tags": "rule", "text": "x"}]}}`,
			want: []string{"set.json:1:45:", "global", `entry "a"`, "tags: must be an array of strings, got a string"},
		},
		{
			name: "text not a string",
			data: `{"global": {"entries": [{"id": "a", "tags": [], "text": 3}]}}`,
			want: []string{"global", `entry "a"`, "text: must be a string, got a number"},
		},
		{
			name: "unknown entry field",
			data: `{"global": {"entries": [{"id": "a", "tag": ["rule"], "text": "x"}]}}`,
			want: []string{`entry "a"`, `unknown field "tag"`},
		},
		{
			name: "entries not an array",
			data: `{"factions": {"盟军": {"entries": {}}}}`,
			want: []string{"factions/盟军", "entries: must be an array of entries, got an object"},
		},
		{
			name: "scope holds something else",
			data: `{"factions": {"盟军": {"entries": [], "notes": "x"}}}`,
			want: []string{"factions/盟军", `unknown key "notes"`},
		},
		{
			name: "dimension not an object",
			data: `{"factions": ["盟军"]}`,
			want: []string{"set.json:1:14:", "factions: a scope dimension must be an object"},
		},
		{
			name: "duplicate scope",
			data: `{"factions": {"盟军": {"entries": []}, "盟军": {"entries": []}}}`,
			want: []string{"factions/盟军", `duplicate scope "盟军" in factions`},
		},
		{
			name: "root not an object",
			data: `[1, 2]`,
			want: []string{"set.json:1:1:", "must be a JSON object, got an array"},
		},
		{
			name: "malformed JSON with line and column",
			data: "{\n  \"global\": {\n    \"entries\": [\n      {\"id\": \"a\" \"tags\": []}\n",
			want: []string{"set.json:4:18:", "malformed JSON", "invalid character"},
		},
		{
			name: "truncated JSON",
			data: "{\"global\": {\"entries\": [",
			want: []string{"set.json:1:25:", "malformed JSON: unexpected end of JSON input"},
		},
		{
			name: "trailing data",
			data: "{} {}",
			want: []string{"set.json:1:4:", "malformed JSON: invalid character '{' after top-level value"},
		},
		{
			// The tree is built recursively; the bounded check keeps it from
			// overflowing the stack, and names where the file goes too deep.
			name: "nested too deep",
			data: `{"global": {"entries": [{"id": "a", "tags": ` + strings.Repeat("[", 126) + strings.Repeat("]", 126) + `}]}}`,
			want: []string{"set.json:1:169:", "malformed JSON: nesting deeper than 128 levels"},
		},
		{
			name: "disabled outside an overlay",
			data: `{"global": {"entries": [{"id": "a", "tags": [], "text": "x", "disabled": true}]}}`,
			want: []string{`entry "a"`, "only makes sense in an overlay"},
		},
		{
			name: "asset without pack assets",
			data: `{"global": {"entries": [{"id": "a", "tags": [], "asset": "combat_policy"}]}}`,
			want: []string{`entry "a"`, `unknown asset "combat_policy"`},
		},
		{
			name: "bad taxonomy tag",
			data: `{"taxonomy": {"tags": ["two words"]}}`,
			want: []string{"taxonomy.tags[0]", "must not contain white space"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadSet("test", []byte(tc.data), "set.json", nil)
			var list SetErrors
			if !errors.As(err, &list) {
				t.Fatalf("LoadSet error = %v, want SetErrors", err)
			}
			if len(list) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(list), err)
			}
			msg := list[0].Error()
			at := 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q lacks %q (after offset %d)", msg, w, at)
				}
				at += i + len(w)
			}
		})
	}
}

func TestLoadSetReportsEveryError(t *testing.T) {
	t.Parallel()
	data := `{
  "global": {"entries": [{"id": "r", "tags": ["rul"], "text": "x"}]},
  "factions": {
    "盟军": {"entries": [
      {"id": "A", "tags": [], "text": ""},
      {"id": "B", "tags": ["vehicle"], "text": "b"},
      {"id": "B", "tags": ["vehicle"], "text": "b"}
    ]}
  }
}`
	_, err := LoadSet("t", []byte(data), "many.json", nil)
	var list SetErrors
	if !errors.As(err, &list) {
		t.Fatalf("error = %v, want SetErrors", err)
	}
	var got []string
	for _, e := range list {
		got = append(got, e.Scope+"|"+e.Entry+"|"+e.Problem)
	}
	want := []string{
		`global|r|unknown tag "rul" (declare extra tags in the set's "taxonomy": {"tags": [...]})`,
		"factions/盟军|A|empty text",
		`factions/盟军|B|duplicate id "B" in scope factions/盟军`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if lines := strings.Count(err.Error(), "\n") + 1; lines != 3 {
		t.Fatalf("Error() has %d lines, want one per problem:\n%s", lines, err)
	}
}

func TestLoadSetAcceptsTheADRFormat(t *testing.T) {
	t.Parallel()
	// The ADR's own example, plus a taxonomy block and a BOM.
	data := "\uFEFF" + `{
  "taxonomy": {"tags": ["policy"]},
  "global": {"entries": [{"id": "general-rules", "tags": ["rule", "policy"], "text": "## 核心原则\n- ..."}]},
  "factions": {
    "盟军": {"entries": [
      {"id": "AlliedMCV", "tags": ["builder", "vehicle", "amphibious", "pack", "unpack", "specialPower:SpecialPower_UnpackReplaceSelf"],
       "text": "### 基地车(AlliedMCV)\n盟军基地车，两栖"}
    ]}
  },
  "maps": {"map_mp_2_rao1": {"entries": [{"id": "overview", "text": "地图"}]}},
  "eras": {"1950": {"entries": []}}
}`
	s, err := LoadSet("ra3", []byte(data), "adr.json", []string{"factions", "maps"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"factions", "maps", "eras"}; !slices.Equal(s.Dimensions, want) {
		t.Errorf("Dimensions = %v, want %v (declared, then undeclared alphabetically)", s.Dimensions, want)
	}
	if !slices.Equal(s.Taxonomy, []string{"policy"}) {
		t.Errorf("Taxonomy = %v", s.Taxonomy)
	}
	if e, ok := s.Entry("maps", "map_mp_2_rao1", "overview"); !ok || len(e.Tags) != 0 || e.Text != "地图" {
		t.Errorf("map entry without tags = %+v, %v", e, ok)
	}
	if !s.HasTag("factions", "盟军", "AlliedMCV", "specialPower:SpecialPower_UnpackReplaceSelf") {
		t.Error("AlliedMCV lost its specialPower tag")
	}
}

func TestLineColumnCountsCharacters(t *testing.T) {
	t.Parallel()
	data := []byte("ab\n盟军x\n")
	tests := []struct {
		name      string
		off       int64
		line, col int
	}{
		{"start", 0, 1, 1},
		{"second line start", 3, 2, 1},
		{"after two Chinese characters", 9, 2, 3},
		{"past the end", 100, 3, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, c := lineColumn(data, tc.off)
			if l != tc.line || c != tc.col {
				t.Fatalf("lineColumn(%d) = %d:%d, want %d:%d", tc.off, l, c, tc.line, tc.col)
			}
		})
	}
}

func FuzzLoadSet(f *testing.F) {
	for _, seed := range []string{
		`{"global": {"entries": [{"id": "a", "tags": ["rule"], "text": "x"}]}}`,
		`{"factions": {"盟军": {"entries": [{"id": "A", "tags": ["vehicle"], "text": "t"}]}}}`,
		`{"taxonomy": {"tags": ["policy"]}, "global": {"entries": []}}`,
		`[`, `{"a": {"b": {"entries": [1, null, true]}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := LoadSet("fuzz", data, "fuzz.json", nil)
		if err != nil {
			var list SetErrors
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v is not a non-empty SetErrors", err)
			}
			for _, e := range list {
				if e.File != "fuzz.json" || e.Line < 1 || e.Column < 1 {
					t.Fatalf("error without a place: %#v", e)
				}
			}
			return
		}
		// A loaded set renders and exports; the export loads back to the same render.
		out := Render(s, nil)
		back, err := LoadSet("fuzz", s.ToFile().JSON(), "export.json", s.Dimensions)
		if err != nil {
			t.Fatalf("export does not load: %v\n%s", err, s.ToFile().JSON())
		}
		if Render(back, nil) != out {
			t.Fatal("export changed the render")
		}
	})
}
