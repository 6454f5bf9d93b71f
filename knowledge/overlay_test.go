package knowledge

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const testOverlay = `{
  "taxonomy": {"tags": ["expert"]},
  "global": {"entries": [
    {"id": "rule-oplog", "tags": ["rule"], "text": "### 操作记录（专家版）\n- 自定义读法"},
    {"id": "house-rule", "tags": ["rule", "expert"], "text": "### 本地规则\n- 新增"}
  ]},
  "factions": {
    "盟军": {"entries": [
      {"id": "AlliedMiner", "disabled": true},
      {"id": "AlliedMCV", "tags": ["vehicle", "builder", "amphibious", "unpack", "specialPower:SpecialPower_UnpackReplaceSelf"], "text": "### AlliedMCV：专家修正\n- 造价：2000"}
    ]},
    "神州": {"entries": [
      {"id": "CelestialMCV", "tags": ["vehicle", "builder"], "text": "### CelestialMCV\n- 用户添加的阵营"}
    ]}
  },
  "maps": {"map_custom": {"entries": [{"id": "map-overview", "tags": [], "text": "### 自制地图"}]}}
}`

var quietLog = slog.New(slog.DiscardHandler)

func TestOverlayOverridesAddsAndDisables(t *testing.T) {
	t.Parallel()
	base, _ := builtinSet(t, "ra3")
	eff, err := base.WithOverlay([]byte(testOverlay), "user_knowledge.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		check func() bool
	}{
		{"override keeps the entry's place", func() bool {
			return base.Global()[1].ID == "rule-oplog" && eff.Global()[1].ID == "rule-oplog" && strings.Contains(eff.Global()[1].Text, "专家版")
		}},
		{"new global entry is added last", func() bool {
			g := eff.Global()
			return len(g) == len(base.Global())+1 && g[len(g)-1].ID == "house-rule"
		}},
		{"extra tag from the overlay's taxonomy", func() bool { return len(eff.WithTag("expert")) == 1 }},
		{"disabled entry is gone from queries", func() bool {
			return !eff.Has("factions", "盟军", "AlliedMiner") && base.Has("factions", "盟军", "AlliedMiner")
		}},
		{"tag queries follow the overlay", func() bool {
			return slices.Equal(eff.AssetsWithTag("factions", "盟军", "specialPower:SpecialPower_UnpackReplaceSelf"), []string{"AlliedMCV"})
		}},
		{"overridden text", func() bool {
			e, _ := eff.Entry("factions", "盟军", "AlliedMCV")
			return strings.Contains(e.Text, "专家修正")
		}},
		{"new scope value is added", func() bool {
			return slices.Equal(eff.ScopeValues("factions"), []string{"盟军", "苏联", "帝国", "神州"}) && eff.Has("factions", "神州", "CelestialMCV")
		}},
		{"new map", func() bool { return eff.Has("maps", "map_custom", "map-overview") }},
		{"the base set is unchanged", func() bool {
			e, _ := base.Entry("factions", "盟军", "AlliedMCV")
			return !strings.Contains(e.Text, "专家修正") && len(base.ScopeValues("factions")) == 3
		}},
		{"render shows the expert's fact", func() bool {
			out := Render(eff, Scopes{"factions": {"盟军"}})
			return strings.Contains(out, "专家修正") && !strings.Contains(out, "### AlliedMiner：")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !tc.check() {
				t.Fatal("failed")
			}
		})
	}
}

func TestOverlayErrors(t *testing.T) {
	t.Parallel()
	base, _ := builtinSet(t, "ra3")
	tests := []struct {
		name string
		data string
		want string
	}{
		{"disable an unknown id", `{"factions": {"盟军": {"entries": [{"id": "AlliedMinerr", "disabled": true}]}}}`,
			`o.json:1:34: factions/盟军: entry "AlliedMinerr": disabled: disables an entry that scope factions/盟军 does not have`},
		{"unknown tag", `{"global": {"entries": [{"id": "x", "tags": ["flying"], "text": "t"}]}}`,
			`o.json:1:46: global: entry "x": tags[0]: unknown tag "flying"`},
		{"empty text on an override", `{"factions": {"盟军": {"entries": [{"id": "AlliedMCV", "tags": []}]}}}`,
			`factions/盟军: entry "AlliedMCV": text: empty text`},
		{"malformed", "{\"global\": ", `o.json:1:12: malformed JSON`},
		{"nested too deep", strings.Repeat("[", 1<<20), `o.json:1:129: malformed JSON: nesting deeper than 128 levels`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := base.WithOverlay([]byte(tc.data), "o.json")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOverlayWatcherHotReload(t *testing.T) {
	t.Parallel()
	base, _ := builtinSet(t, "ra3")
	dir := t.TempDir()
	path := filepath.Join(dir, "user_knowledge.json")
	write := func(content string) {
		// Editors save by writing a temporary file and renaming it over the target.
		tmp := filepath.Join(dir, ".user_knowledge.json.swp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	fact := func(s *Set) string {
		e, _ := s.Entry("factions", "盟军", "AlliedMCV")
		return e.Text
	}
	overlay := func(text string) string {
		return `{"factions": {"盟军": {"entries": [{"id": "AlliedMCV", "tags": ["vehicle", "builder"], "text": "` + text + `"}]}}}`
	}

	write(overlay("第一版"))
	w, err := WatchOverlay(base, path, WatchOptions{Debounce: 20 * time.Millisecond, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if fact(w.Set()) != "第一版" || w.Status().Version != 1 || w.Set().Version != 1 || !w.Status().Present {
		t.Fatalf("initial load: fact %q, status %+v", fact(w.Set()), w.Status())
	}
	renderer := NewRenderer(8)
	before := renderer.Render(w.Set(), Scopes{"factions": {"盟军"}})

	// Valid -> invalid: the last good version stays, and the status says why.
	write(`{"factions": {"盟军": {"entries": [{"id": "AlliedMCV", "tags": ["flying"], "text": "坏"}]}}}`)
	waitFor(t, "the invalid overlay to be reported", func() bool { return w.Status().LastError != "" })
	st := w.Status()
	if !strings.Contains(st.LastError, `unknown tag "flying"`) || !strings.Contains(st.LastError, "user_knowledge.json") {
		t.Errorf("LastError = %q, want the file and the problem", st.LastError)
	}
	if st.Version != 1 || fact(w.Set()) != "第一版" {
		t.Fatalf("after an invalid overlay: version %d, fact %q; want the last good version", st.Version, fact(w.Set()))
	}

	// Invalid -> valid again: a new version, the error cleared, a new render.
	write(overlay("第二版"))
	waitFor(t, "the valid overlay to load", func() bool { return w.Status().Version == 2 })
	if st := w.Status(); st.LastError != "" || fact(w.Set()) != "第二版" || w.Set().Version != 2 {
		t.Fatalf("after a valid overlay: status %+v, fact %q", st, fact(w.Set()))
	}
	after := renderer.Render(w.Set(), Scopes{"factions": {"盟军"}})
	if before == after || !strings.Contains(after, "第二版") {
		t.Fatal("the render cache served the previous version")
	}

	// Removing the file leaves the built-in set alone.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removal to apply", func() bool { return w.Status().Version == 3 })
	if w.Status().Present || fact(w.Set()) != fact(base) {
		t.Fatalf("after removal: status %+v", w.Status())
	}
}

func TestWatchOverlayRejectsAnInvalidFileAtStart(t *testing.T) {
	t.Parallel()
	base, _ := builtinSet(t, "ra3")
	path := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(path, []byte(`{"global": {"entries": [{"id": "", "text": "x"}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := WatchOverlay(base, path, WatchOptions{Logger: quietLog})
	var list SetErrors
	if !errors.As(err, &list) || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("error = %v, want the overlay's SetErrors", err)
	}
}

func TestWatchOverlayWithoutAFile(t *testing.T) {
	t.Parallel()
	base, _ := builtinSet(t, "ra3")
	w, err := WatchOverlay(base, filepath.Join(t.TempDir(), "absent.json"), WatchOptions{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if st := w.Status(); st.Present || st.Version != 1 || st.LastError != "" {
		t.Fatalf("status = %+v", st)
	}
	if Render(w.Set(), Scopes{"factions": {"盟军"}}) != Render(base, Scopes{"factions": {"盟军"}}) {
		t.Fatal("without an overlay the effective set must render like the built-in one")
	}
}
