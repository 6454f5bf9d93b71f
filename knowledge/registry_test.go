package knowledge

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// copyBuiltinPack writes the embedded pack name into dir/as.
func copyBuiltinPack(t *testing.T, name, dir, as string) string {
	t.Helper()
	root := filepath.Join(dir, as)
	err := fs.WalkDir(builtinFS, "packs/"+name, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(builtinFS, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(root, strings.TrimPrefix(path, "packs/"+name+"/"))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestUserPackReplacesTheBuiltinOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := copyBuiltinPack(t, "ra3", dir, "ra3")
	yaml := filepath.Join(root, "pack.yaml")
	b, _ := os.ReadFile(yaml)
	if err := os.WriteFile(yaml, []byte(strings.Replace(string(b), "description: Red Alert 3", "description: Local RA3", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := LoadRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := reg.Pack("ra3")
	if !strings.HasPrefix(p.Description, "Local RA3") || p.Dir != root {
		t.Fatalf("ra3 pack = %q from %s, want the user's", p.Description, p.Dir)
	}
	if _, sp := reg.Set("ra3-corona"); sp != p {
		t.Fatal("the user's pack does not own its sets")
	}
	if reg.Pack("dnd") == nil {
		t.Fatal("the other built-in pack is gone")
	}
}

func TestRegistryErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"a set name declared by two packs", func(t *testing.T, dir string) {
			root := copyBuiltinPack(t, "dnd", dir, "scenes")
			yaml := filepath.Join(root, "pack.yaml")
			b, _ := os.ReadFile(yaml)
			s := strings.Replace(string(b), "name: dnd", "name: scenes", 1)
			s = strings.Replace(s, "  dnd:\n", "  ra3:\n", 1)
			s = strings.Replace(s, "default_set: dnd", "default_set: ra3", 1)
			if err := os.WriteFile(yaml, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}, `knowledge set "ra3" is declared by two packs`},
		{"a folder without pack.yaml", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "notes"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "notes/pack.yaml: missing: a pack folder holds a pack.yaml"},
		{"a broken user pack", func(t *testing.T, dir string) {
			root := copyBuiltinPack(t, "dnd", dir, "dnd")
			if err := os.WriteFile(filepath.Join(root, "sets", "dnd.json"), []byte(`{"global": 1}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "dnd/sets/dnd.json:1:12: global: a scope must be an object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tc.setup(t, dir)
			_, err := LoadRegistry(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
	// Hidden and underscore folders are not packs.
	dir := t.TempDir()
	for _, d := range []string{".git", "_drafts"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadRegistry(dir); err != nil {
		t.Fatalf("skipped folders: %v", err)
	}
}

// Every asset a fixture answer claims exists in the claiming player's faction scope,
// except where the case expects asset.unknown: the built-in sets are complete enough
// for the validator's cases.
func TestFixtureClaimsUseKnownAssets(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/cases/*.json")
	if len(files) == 0 {
		t.Fatal("no cases")
	}
	blockRe := regexp.MustCompile("(?s)```(?i:json)?\\s*\\n(.*?)\\n```")
	commentRe := regexp.MustCompile(`(?m)^\s*//.*$`)
	trailingComma := regexp.MustCompile(`,(\s*[}\]])`)
	checked := 0
	for _, path := range files {
		var c struct {
			Replay   string   `json:"replay"`
			Segments []string `json:"replay_segments"`
			Answer   string   `json:"answer"`
			Expect   []struct {
				Code, Path string
			} `json:"expect"`
		}
		b, _ := os.ReadFile(path)
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		replay := c.Replay
		if replay == "" {
			replay = c.Segments[0]
		}
		log, err := os.ReadFile(filepath.Join("testdata/replays", replay))
		if err != nil {
			t.Fatal(err)
		}
		ex := ExtractContext(reg.Pack("ra3"), string(log))
		set, _ := reg.Set(ex.KnowledgeSet)
		m := blockRe.FindAllStringSubmatch(c.Answer, -1)
		if m == nil {
			continue // c09: no block
		}
		block := trailingComma.ReplaceAllString(commentRe.ReplaceAllString(m[len(m)-1][1], ""), "$1")
		var claims struct {
			UnitClaims []struct {
				Player string `json:"player"`
				Claim  string `json:"claim"`
			} `json:"unitClaims"`
		}
		if err := json.Unmarshal([]byte(block), &claims); err != nil {
			t.Fatalf("%s: claims block: %v", path, err)
		}
		for i, uc := range claims.UnitClaims {
			faction := ""
			for _, p := range ex.Players {
				if p.Name == uc.Player {
					faction = p.Scope
				}
			}
			if faction == "" || uc.Claim == "" {
				continue
			}
			expectUnknown := false
			for _, e := range c.Expect {
				if e.Code == "asset.unknown" && e.Path == "unitClaims["+itoa(i)+"]" {
					expectUnknown = true
				}
			}
			checked++
			if has := set.Has("factions", faction, uc.Claim); has == expectUnknown {
				t.Errorf("%s: unitClaims[%d] %s of %s: in set %s = %v, case expects asset.unknown = %v", path, i, uc.Claim, faction, set.Name, has, expectUnknown)
			}
		}
	}
	if checked < 15 {
		t.Fatalf("checked only %d claims", checked)
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
