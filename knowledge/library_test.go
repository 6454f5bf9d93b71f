package knowledge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLibraryServesTheEffectiveSet(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ra3.json")
	if err := os.WriteFile(path, []byte(`{"factions": {"盟军": {"entries": [{"id": "AlliedMCV", "tags": ["vehicle"], "text": "### AlliedMCV：专家版"}]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	lib, err := NewLibrary(reg, LibraryOptions{Overlays: map[string]string{"ra3": path}, Debounce: 20 * time.Millisecond, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	scopes := Scopes{"factions": {"盟军"}}
	out, ok := lib.Render("ra3", scopes)
	if !ok || !strings.Contains(out, "专家版") {
		t.Fatal("the overlay is not in the rendered knowledge")
	}
	// Sets without an overlay are the registry's.
	if s, p := lib.Set("ra3-corona"); s == nil || p.Name != "ra3" || s.Version != 0 {
		t.Fatalf("ra3-corona = %v, %v", s, p)
	}
	if _, ok := lib.Render("nope", nil); ok {
		t.Fatal("an unknown set rendered")
	}
	// An expert's edit shows in the next render without a restart.
	if err := os.WriteFile(path, []byte(`{"factions": {"盟军": {"entries": [{"id": "AlliedMCV", "tags": ["vehicle"], "text": "### AlliedMCV：第二版"}]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the edit to show", func() bool {
		out, _ := lib.Render("ra3", scopes)
		return strings.Contains(out, "第二版")
	})
	st := lib.OverlayStatus()
	if len(st) != 1 || st[0].Set != "ra3" || st[0].Version != 2 || st[0].LastError != "" {
		t.Fatalf("status = %+v", st)
	}
}

func TestLibraryRejectsAnOverlayForAnUnknownSet(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewLibrary(reg, LibraryOptions{Overlays: map[string]string{"ra4": "x.json"}})
	if err == nil || !strings.Contains(err.Error(), `unknown knowledge set "ra4"`) {
		t.Fatalf("error = %v", err)
	}
}
