package knowledge

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected output of golden files under testdata/")

// golden is a golden file: comment lines starting with "#", then sections
// "-- name --" each followed by its text. The last section holds the expected output.
type golden struct {
	path     string
	comment  string
	names    []string
	sections map[string]string
}

func readGolden(t *testing.T, path string) *golden {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g := &golden{path: path, sections: map[string]string{}}
	cur := ""
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "-- "); ok && strings.HasSuffix(name, " --") {
			cur = strings.TrimSuffix(name, " --")
			g.names = append(g.names, cur)
			g.sections[cur] = ""
			continue
		}
		if cur == "" {
			g.comment += line
			continue
		}
		g.sections[cur] += line
	}
	return g
}

// check compares got with the last section, or rewrites it with -update.
func (g *golden) check(t *testing.T, got string) {
	t.Helper()
	last := g.names[len(g.names)-1]
	if *update {
		var b strings.Builder
		b.WriteString(g.comment)
		for _, n := range g.names {
			b.WriteString("-- " + n + " --\n")
			if n == last {
				b.WriteString(got)
			} else {
				b.WriteString(g.sections[n])
			}
		}
		if err := os.WriteFile(g.path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want := g.sections[last]; got != want {
		t.Errorf("%s: output differs from the golden file (run go test ./knowledge -run %s -update to accept):\n%s",
			g.path, t.Name(), firstDiff(got, want))
	}
}

// firstDiff shows the first differing line.
func firstDiff(got, want string) string {
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + g + "\nwant: " + w
		}
	}
	return "(same lines; different line endings?)"
}

func parseScopesSection(text string) Scopes {
	sc := Scopes{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		dim, vals, ok := strings.Cut(line, "=")
		if ok {
			sc[dim] = strings.Split(vals, ",")
		}
	}
	return sc
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/render/*.golden")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			g := readGolden(t, path)
			var set *Set
			var scopes Scopes
			switch {
			case g.sections["set"] != "":
				var dims []string
				if d := strings.TrimSpace(g.sections["dimensions"]); d != "" {
					dims = strings.Split(d, ",")
				}
				set, err = ParseSet([]byte(g.sections["set"]), path, SetOptions{Name: "golden", Dimensions: dims, Title: "Golden", Language: "en"})
				if err != nil {
					t.Fatal(err)
				}
				scopes = parseScopesSection(g.sections["scopes"])
			case g.sections["replay"] != "":
				ex := ExtractContext(reg.Pack("ra3"), g.sections["replay"])
				set, _ = reg.Set(ex.KnowledgeSet)
				if set == nil {
					t.Fatalf("the replay selects set %q, which does not exist", ex.KnowledgeSet)
				}
				scopes = ex.Scopes
			case g.sections["builtin"] != "":
				set, _ = reg.Set(strings.TrimSpace(g.sections["builtin"]))
				scopes = parseScopesSection(g.sections["scopes"])
			default:
				t.Fatal("golden file has no set, replay or builtin section")
			}
			got := Render(set, scopes)
			g.check(t, got)
			// Deterministic byte for byte: render again from a fresh map.
			again := Scopes{}
			for k, v := range scopes {
				again[k] = append([]string(nil), v...)
			}
			if Render(set, again) != got {
				t.Fatal("a second render differs")
			}
		})
	}
}

func TestRenderFactionsFollowPlayerOrder(t *testing.T) {
	t.Parallel()
	s, _ := builtinSet(t, "ra3")
	tests := []struct {
		name     string
		factions []string
		first    string
		second   string
	}{
		{"allied first", []string{"盟军", "苏联"}, "## 阵营：盟军", "## 阵营：苏联"},
		{"soviet first", []string{"苏联", "盟军"}, "## 阵营：苏联", "## 阵营：盟军"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := Render(s, Scopes{"factions": tc.factions, "maps": {"map_mp_2_rao1"}})
			g, a, b, m := strings.Index(out, "## 通用规则"), strings.Index(out, tc.first), strings.Index(out, tc.second), strings.Index(out, "## 地图：map_mp_2_rao1")
			if g < 0 || a < 0 || b < 0 || m < 0 || !(g < a && a < b && b < m) {
				t.Fatalf("section order wrong: global@%d %s@%d %s@%d map@%d", g, tc.first, a, tc.second, b, m)
			}
			if strings.Contains(out, "## 阵营：帝国") {
				t.Fatal("rendered a faction nobody plays")
			}
		})
	}
}

func TestRenderWithoutScopesIsGlobalOnly(t *testing.T) {
	t.Parallel()
	s, _ := builtinSet(t, "ra3")
	out := Render(s, nil)
	if !strings.Contains(out, "### 核心原则") || strings.Contains(out, "## 阵营") || strings.Contains(out, "## 地图") {
		t.Fatalf("render without scopes:\n%s", out)
	}
}
