package claims

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// The generic reader (generic.go) reads ra3's answers as its typed reader does:
// the same records (paths, levels, evidence, every declared field) and the same
// issues (code, severity, path, arguments; the English fallback messages of the
// alias and missing-field issues are worded for any kind, and the pack's messages
// replace them anyway). The typed reader stays ra3's fast path.

// newGenericRA3Parser is the ra3 parser made to read with the generic reader.
func newGenericRA3Parser(tb testing.TB) *Parser {
	tb.Helper()
	p := newRA3Parser(tb)
	g := *p
	g.typed = false
	return &g
}

// ra3Answers are every ra3 answer the repository holds: each string holding the
// claims marker or a claims array in the shared fixtures and the testdata cases
// of this package, validate and revise.
func ra3Answers(tb testing.TB) []string {
	tb.Helper()
	var files []string
	for _, glob := range []string{
		"/work/shared/fixtures/ra3/cases/*.json",
		"testdata/cases/*.json",
		"../validate/testdata/cases/*.json",
		"../revise/testdata/cases/*.json",
		"../revise/testdata/golden/*.txt",
	} {
		m, _ := filepath.Glob(glob)
		files = append(files, m...)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if strings.Contains(x, ra3Marker) || strings.Contains(x, "unitClaims") {
				out = append(out, x)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			v = string(b)
		}
		walk(v)
	}
	if len(out) < 20 {
		tb.Fatalf("only %d ra3 answers found", len(out))
	}
	return out
}

// checkGenericAsTyped compares the generic and the typed reads of content.
func checkGenericAsTyped(t *testing.T, typed, generic *Parser, content string) {
	t.Helper()
	for _, req := range []Requirement{Optional, Required} {
		want, got := typed.Parse(content, req), generic.Parse(content, req)
		if got.Location != want.Location || got.Block != want.Block || got.JSON != want.JSON || got.Valid != want.Valid {
			t.Fatalf("%q: generic read %+v, typed %+v", content, got.Location, want.Location)
		}
		if g, w := issueTuples(got.Issues), issueTuples(want.Issues); !reflect.DeepEqual(g, w) {
			t.Fatalf("%q: generic issues\n%v\ntyped\n%v", content, g, w)
		}
		compareRecords(t, content, generic, got.Records, want.Records)
		typed.ReadIn(nil, content, req, func(read *Claims) {
			compareRecords(t, content, generic, got.Records, read.Records)
		})
	}
}

func compareRecords(t *testing.T, content string, p *Parser, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%q: %d generic records, %d typed", content, len(got), len(want))
	}
	for i := range got {
		g, w := &got[i], &want[i]
		if g.Kind != w.Kind || g.Index != w.Index || g.Path != w.Path || g.Level != w.Level || g.LevelRaw != w.LevelRaw ||
			g.LevelKnown != w.LevelKnown || !reflect.DeepEqual(g.Evidence, w.Evidence) {
			t.Fatalf("%q: record %d generic %+v\ntyped %+v", content, i, g, w)
		}
		spec := p.kinds[p.kindIndex(g.Kind)]
		for _, f := range spec.fields {
			gv, gok := g.Field(f.name)
			wv, wok := w.Field(f.name)
			if gok != wok || !reflect.DeepEqual(gv, wv) || g.FieldText(f.name) != w.FieldText(f.name) {
				t.Fatalf("%q: %s.%s generic %#v %v %q, typed %#v %v %q", content, g.Path, f.name, gv, gok, g.FieldText(f.name), wv, wok, w.FieldText(f.name))
			}
		}
		if _, ok := g.Field("noSuchField"); ok {
			t.Fatalf("an undeclared field has a value")
		}
	}
}

type issueTuple struct {
	Code     string
	Severity interceptors.Severity
	Path     string
	Args     map[string]string
}

func issueTuples(issues []interceptors.Issue) []issueTuple {
	out := make([]issueTuple, len(issues))
	for i, is := range issues {
		out[i] = issueTuple{is.Code, is.Severity, is.Path, is.Args}
	}
	return out
}

func TestGenericReaderReadsRA3AsTyped(t *testing.T) {
	t.Parallel()
	typed, generic := newRA3Parser(t), newGenericRA3Parser(t)
	if !typed.typed {
		t.Fatal("the ra3 parser does not take the typed path")
	}
	seeds := append(append(ra3Answers(t), fuzzSeeds(t)...), answer18())
	for _, s := range diffSeeds {
		seeds = append(seeds, s, ra3Marker+"\n```json\n"+s+"\n```\n")
	}
	for _, s := range seeds {
		checkGenericAsTyped(t, typed, generic, s)
	}
}

func FuzzGenericReaderAsTyped(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	for _, s := range diffSeeds {
		f.Add(s)
	}
	typed, generic := newRA3Parser(f), newGenericRA3Parser(f)
	f.Fuzz(func(t *testing.T, content string) {
		checkGenericAsTyped(t, typed, generic, content)
	})
}

// The ra3 pack's declared kinds take the typed path, as the seed defaults do.
func TestRA3PackDeclarationIsTyped(t *testing.T) {
	t.Parallel()
	reg, err := knowledge.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	pack := reg.Pack("ra3")
	p, err := NewParser(pack.Claims, pack.Facts.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	if !p.typed || p.Cap(UnitClaimsField) != 10 || p.Cap(EventClaimsField) != 5 || p.Cap(TimelineClaimsField) != 3 {
		t.Fatalf("typed %v, caps %d %d %d", p.typed, p.Cap(UnitClaimsField), p.Cap(EventClaimsField), p.Cap(TimelineClaimsField))
	}
}
