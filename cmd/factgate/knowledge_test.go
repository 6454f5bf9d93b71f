package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors/inject"
	"github.com/factgate/factgate/knowledge"
)

func runCmd(t *testing.T, run func(context.Context, []string, io.Writer, io.Writer) int, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestKnowledgeLint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := writeFile(t, dir, "good.json", `{"global": {"entries": [{"id": "a", "tags": ["rule"], "text": "x"}]}}`)
	bad := writeFile(t, dir, "bad.json", "{\n  \"global\": {\"entries\": [\n    {\"id\": \"a\", \"tags\": [\"rul\"], \"text\": \"x\"},\n    {\"id\": \"b\", \"tags\": [], \"text\": \"\"}\n  ]}\n}\n")
	overlay := writeFile(t, dir, "overlay.json", `{"factions": {"盟军": {"entries": [{"id": "AlliedMiner", "disabled": true}]}}}`)
	badOverlay := writeFile(t, dir, "bad-overlay.json", `{"factions": {"盟军": {"entries": [{"id": "NoSuchUnit", "disabled": true}]}}}`)
	brokenPack := writeFile(t, dir, "pack/pack.yaml", "name: broken\nlanguage: en\nknowledge_sets: {s: {file: s.json}}\ndefault_set: s\nflavour: x\n")
	// A pack whose claim kinds are declared badly and disagree with its contract.
	writeFile(t, dir, "kinds/s.json", `{"global": {"entries": [{"id": "r", "tags": ["rule"], "text": "x"}]}}`)
	writeFile(t, dir, "kinds/r.tmpl", "{{range .Issues}}{{.Message}}{{end}}")
	writeFile(t, dir, "kinds/contract.md", "End with [claims]: orderClaims with order.\n\n[claims]\n```json\n{\"orderClaims\": [], \"refunds\": []}\n```\n")
	kindsPack := writeFile(t, dir, "kinds/pack.yaml", "name: kinds\nlanguage: en\nknowledge_sets: {s: {file: s.json}}\ndefault_set: s\n"+
		"claims:\n  marker: '[claims]'\n  contract: contract.md\n  kinds:\n    orderClaims:\n      fields: {order: string, total: money}\n      required: [order, status]\n"+
		"revision: {template: r.tmpl, repair_template: r.tmpl}\n")

	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		stderrNone string
	}{
		{"a good set", []string{good}, 0, []string{good + ": ok"}, nil, "."},
		{"every error of a bad set with its place", []string{good, bad}, 1, []string{good + ": ok"},
			[]string{bad + `:3:26: global: entry "a": tags[0]: unknown tag "rul"`, bad + `:4:37: global: entry "b": text: empty text`}, ""},
		{"an overlay of a built-in set", []string{"--set", "ra3", overlay}, 0, []string{overlay + ": ok"}, nil, "."},
		{"a bad overlay", []string{"--set", "ra3", badOverlay}, 1, nil, []string{`entry "NoSuchUnit": disabled: disables an entry that scope factions/盟军 does not have`}, ""},
		{"an unknown set", []string{"--set", "ra4", overlay}, 2, nil, []string{`unknown knowledge set "ra4"`}, ""},
		{"a broken pack.yaml", []string{brokenPack}, 1, nil, []string{"pack.yaml:5: flavour: unknown key (known keys: name, description"}, ""},
		{"claim kinds and their contract", []string{kindsPack}, 1, nil, []string{
			`kinds/pack.yaml:10:38: claims.kinds.orderClaims.fields.total: unknown type "money"`,
			`kinds/pack.yaml:11:25: claims.kinds.orderClaims.required: "status" is not a declared field`,
			`kinds/contract.md:5:21: the example's claims array "refunds" is not a declared kind`,
			`kinds/pack.yaml:10:31: claims.kinds.orderClaims.fields.total: the contract (contract.md) never mentions the field "total"`,
		}, ""},
		{"the built-in packs", []string{"../../knowledge/packs/ra3/pack.yaml", "../../knowledge/packs/dnd/pack.yaml", "../../knowledge/packs/dnd/sets/dnd.json"}, 0,
			[]string{"ra3/pack.yaml: ok", "dnd/pack.yaml: ok", "dnd/sets/dnd.json: ok"}, nil, "."},
		{"no files", nil, 2, nil, []string{"Usage: factgate knowledge lint"}, ""},
		{"help", []string{"--help"}, 0, nil, []string{"Usage: factgate knowledge lint", "-set"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCmd(t, runKnowledgeLint, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tc.stderrNone != "" && stderr != "" {
				t.Errorf("unexpected stderr:\n%s", stderr)
			}
		})
	}
}

func TestKnowledgeRender(t *testing.T) {
	t.Parallel()
	reg, err := knowledge.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	corona, pack := reg.Set("ra3-corona")
	knowledgeText := knowledge.Render(corona, knowledge.Scopes{"factions": {"神州", "盟军"}, "maps": {"map_mp_2_rao1"}})
	// The system prompt the proxy injects on a validating route, and a newline.
	want := inject.Compose(inject.Parts{Knowledge: knowledgeText, Contract: inject.PackContract(pack)}) + "\n"
	dir := t.TempDir()
	replay := writeFile(t, dir, "replay.txt", "Mod: corona\n地图: map_mp_2_rao1\n玩家: 青龙 (神州); Blue (盟军)\n[操作记录]\n0:01.00 青龙 选择 [UnitId]1\n")
	overlay := writeFile(t, dir, "overlay.json", `{"factions": {"神州": {"entries": [{"id": "CelestialMCV", "tags": ["vehicle", "builder"], "text": "### CelestialMCV\n- 专家修正"}]}}}`)
	custom := writeFile(t, dir, "custom.md", "你是解说。\n")
	rules := writeFile(t, dir, "rules.md", "- 规则一。\n")

	tests := []struct {
		name   string
		args   []string
		code   int
		exact  string
		has    []string
		hasNot []string
	}{
		{"the issue's example", []string{"--set", "ra3-corona", "--factions", "神州,盟军", "--map", "map_mp_2_rao1"}, 0, want, nil, nil},
		{"generic scopes", []string{"--set", "ra3-corona", "--scope", "factions=神州,盟军", "--scope", "maps=map_mp_2_rao1"}, 0, want, nil, nil},
		{"from a replay", []string{"--replay", replay}, 0, want, nil, nil},
		{"flags override the replay", []string{"--replay", replay, "--factions", "盟军"}, 0, "", []string{"## 阵营：盟军"}, []string{"## 阵营：神州"}},
		{"with an overlay", []string{"--replay", replay, "--overlay", overlay}, 0, "", []string{"专家修正"}, nil},
		{"knowledge only", []string{"--set", "ra3-corona", "--factions", "神州,盟军", "--map", "map_mp_2_rao1", "--knowledge-only"}, 0, knowledgeText, nil, nil},
		{"a route that does not validate", []string{"--replay", replay, "--no-contract", "--rules", "- 只用中文。"}, 0,
			inject.Compose(inject.Parts{Knowledge: knowledgeText, AdditionalRules: "- 只用中文。"}) + "\n", nil, nil},
		{"rules and custom prompt files", []string{"--set", "ra3", "--no-contract", "--custom-prompt-file", custom, "--rules-file", rules}, 0,
			"你是解说。\n\n- 规则一。\n", nil, nil},
		{"the contract follows the knowledge", []string{"--set", "ra3"}, 0, "", []string{"## 通用规则", "[机器可读声明]"}, nil},
		{"rules twice", []string{"--set", "ra3", "--rules", "a", "--rules-file", rules}, 2, "", nil, nil},
		{"a missing rules file", []string{"--set", "ra3", "--rules-file", filepath.Join(dir, "nope.md")}, 1, "", nil, nil},
		{"unknown scope values are skipped", []string{"--set", "ra3", "--factions", "神州"}, 0, "", []string{"## 通用规则"}, []string{"## 阵营"}},
		{"unknown set", []string{"--set", "ra9"}, 2, "", nil, nil},
		{"nothing to render", nil, 2, "", nil, nil},
		{"bad scope flag", []string{"--set", "ra3", "--scope", "factions"}, 2, "", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCmd(t, runKnowledgeRender, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			if tc.exact != "" && stdout != tc.exact {
				t.Errorf("output is not exactly the rendered knowledge (%d vs %d bytes)", len(stdout), len(tc.exact))
			}
			for _, w := range tc.has {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			for _, w := range tc.hasNot {
				if strings.Contains(stdout, w) {
					t.Errorf("output has %q", w)
				}
			}
		})
	}
}

func TestKnowledgeExportRoundTrips(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, runKnowledgeExport, "--set", "ra3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	reg, _ := knowledge.Builtin()
	ra3, _ := reg.Set("ra3")
	// The export is a valid set with the same content, and a valid overlay.
	back, err := knowledge.ParseSet([]byte(stdout), "export.json", knowledge.SetOptions{
		Name: "ra3", Dimensions: ra3.Dimensions, Title: ra3.Title, Headings: ra3.Headings, Language: ra3.Language,
	})
	if err != nil {
		t.Fatal(err)
	}
	sc := knowledge.Scopes{"factions": {"盟军", "苏联", "帝国"}, "maps": ra3.ScopeValues("maps")}
	if knowledge.Render(back, sc) != knowledge.Render(ra3, sc) {
		t.Fatal("the exported set renders differently")
	}
	if _, err := ra3.WithOverlay([]byte(stdout), "export.json"); err != nil {
		t.Fatalf("the export is not a valid overlay: %v", err)
	}
	if code, _, _ := runCmd(t, runKnowledgeExport); code != 2 {
		t.Fatalf("export without --set: exit %d, want 2", code)
	}
}

func TestKnowledgeList(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runCmd(t, runKnowledgeList)
	if code != 0 || !strings.Contains(stdout, "factions: 盟军, 苏联, 帝国, 神州") || !strings.Contains(stdout, "set dnd (default)") {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
}

func TestKnowledgeCommandsAreRegistered(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"knowledge lint", "knowledge render", "knowledge export", "knowledge list"} {
		if _, ok := commands[name]; !ok {
			t.Errorf("%q is not registered", name)
		}
	}
}
