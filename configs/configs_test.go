package configs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// TestEveryConfigDecodes decodes every file in configs/ with the loader of its kind,
// so an example that drifts from the code fails here.
func TestEveryConfigDecodes(t *testing.T) {
	files, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".go") {
			continue
		}
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			continue // deploy/ (checked by deploy_test.go) and the units package
		}
		seen++
		t.Run(f, func(t *testing.T) {
			switch {
			case f == "mock-script.yaml":
				if _, err := mockupstream.LoadScript(f); err != nil {
					t.Fatal(err)
				}
			case strings.HasSuffix(f, ".schema.json"):
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				var v map[string]any
				if err := json.Unmarshal(b, &v); err != nil {
					t.Fatalf("not JSON: %v", err)
				}
			case strings.HasSuffix(f, ".overlay.json"):
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				reg, err := knowledge.Builtin()
				if err != nil {
					t.Fatal(err)
				}
				set, _ := reg.Set(strings.TrimSuffix(f, ".overlay.json"))
				if set == nil {
					t.Fatalf("no built-in set for overlay %s", f)
				}
				if _, err := set.WithOverlay(b, f); err != nil {
					t.Fatal(err)
				}
			case strings.HasSuffix(f, ".yaml"):
				warnings, err := proxy.CheckConfig(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range warnings {
					t.Logf("warning: %s", w)
				}
			default:
				t.Fatalf("no loader knows %s: add one to this test", f)
			}
		})
	}
	if seen < 3 {
		t.Fatalf("only %d config files", seen)
	}
}
