package abtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/factgate/factgate/interceptors"
)

func TestABrokenExperimentFailsAtStartUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "empty.md"), []byte(" \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	two := func(b string) string {
		return "name: e\ncontrol: a\nvariants:\n  - {name: a, weight: 1}\n  - {name: b, weight: 1, " + b + "}\n"
	}
	tests := []struct {
		name   string
		yaml   string
		stages stagesOn // nil: every stage
		want   []string
	}{
		{name: "no name", yaml: "control: a\nvariants: [{name: a, weight: 1}, {name: b, weight: 1}]", want: []string{"name: missing"}},
		{name: "a name that cannot label a key", yaml: "name: 'a b{c}'\ncontrol: a\nvariants: [{name: a, weight: 1}, {name: b, weight: 1}]", want: []string{`name: "a b{c}" must be`}},
		{name: "one variant", yaml: "name: e\ncontrol: a\nvariants: [{name: a, weight: 1}]", want: []string{"variants: an experiment needs at least two variants (it has 1)"}},
		{name: "duplicate variant names", yaml: "name: e\ncontrol: a\nvariants: [{name: a, weight: 1}, {name: a, weight: 2}]", want: []string{`variants[1] (a).name: "a" is already the name of variants[0]`}},
		{name: "a zero weight", yaml: "name: e\ncontrol: a\nvariants: [{name: a, weight: 1}, {name: b, weight: 0}]", want: []string{"variants[1] (b).weight: 0 must be a number greater than 0"}},
		{name: "a missing weight", yaml: "name: e\ncontrol: a\nvariants: [{name: a, weight: 1}, {name: b}]", want: []string{"variants[1] (b).weight: 0 must be a number greater than 0"}},
		{name: "a negative weight", yaml: "name: e\ncontrol: a\nvariants: [{name: a, weight: -1}, {name: b, weight: 1}]", want: []string{"variants[0] (a).weight: -1 must be a number greater than 0"}},
		{name: "no control", yaml: "name: e\nvariants: [{name: a, weight: 1}, {name: b, weight: 1}]", want: []string{"control: missing"}},
		{name: "a control that is not a variant", yaml: "name: e\ncontrol: c\nvariants: [{name: a, weight: 1}, {name: b, weight: 1}]", want: []string{`control: no variant named "c" (variants: a, b)`}},
		{name: "an unknown knowledge set", yaml: two("knowledge_set: ra3-uprising"), want: []string{`variants[1] (b).knowledge_set: no knowledge set named "ra3-uprising" (pack ra3 has: ra3, ra3-corona)`}},
		{name: "a knowledge set of another pack", yaml: two("knowledge_set: dnd"), want: []string{`variants[1] (b).knowledge_set: knowledge set "dnd" belongs to pack dnd, not to the route's pack ra3`}},
		{name: "a missing prompt file", yaml: two("use_custom_system_prompt: true, custom_system_prompt_file: prompts/none.md"), want: []string{"variants[1] (b).custom_system_prompt_file: open", "none.md: no such file or directory"}},
		{name: "an empty rules file", yaml: two("additional_rules_file: empty.md"), want: []string{"variants[1] (b).additional_rules_file:", "empty.md is empty"}},
		{name: "a custom prompt without use_custom_system_prompt", yaml: two("custom_system_prompt: x"), want: []string{"variants[1] (b).custom_system_prompt: set, but use_custom_system_prompt is not true"}},
		{name: "use_custom_system_prompt without a prompt", yaml: two("use_custom_system_prompt: true"), want: []string{"variants[1] (b).use_custom_system_prompt: true needs custom_system_prompt or custom_system_prompt_file"}},
		{name: "inline and file rules", yaml: two("additional_rules: x, additional_rules_file: r.md"), want: []string{"additional_rules and additional_rules_file are exclusive"}},
		{name: "a reserved sampling field", yaml: two("sampling: {messages: []}"), want: []string{`variants[1] (b).sampling.messages: the variant may not set "messages"`}},
		{name: "a sampling field that would be a path", yaml: two("sampling: {a.b: 1}"), want: []string{`variants[1] (b).sampling: "a.b" is not a plain request field name`}},
		{name: "a negative temperature", yaml: two("temperature: -0.5"), want: []string{"variants[1] (b).temperature: -0.5 must be a number of at least 0"}},
		{name: "top_p above 1", yaml: two("top_p: 1.5"), want: []string{"variants[1] (b).top_p: 1.5 must be between 0 and 1"}},
		{name: "max_tokens 0", yaml: two("max_tokens: 0"), want: []string{"variants[1] (b).max_tokens: 0 must be greater than 0"}},
		{name: "max_revisions out of range", yaml: two("max_revisions: 11"), want: []string{"variants[1] (b).max_revisions: 11 is out of range (want 0 to 10)"}},
		{name: "a prompt override on a route that does not inject", yaml: two("additional_rules: x"), stages: stagesOn{"validate", "revise"}, want: []string{"variants[1] (b).additional_rules: the route has no inject block"}},
		{name: "validate on a route without validation", yaml: two("validate: true"), stages: stagesOn{"inject"}, want: []string{"variants[1] (b).validate: the route has no validate block"}},
		{name: "revision settings on a route without revision", yaml: two("max_revisions: 1, revision_threshold: warning"), stages: stagesOn{"inject"}, want: []string{"variants[1] (b).max_revisions: the route has no hidden revision", "variants[1] (b).revision_threshold: the route has no hidden revision"}},
		{name: "an unknown notice mode", yaml: two("notice: footer"), want: []string{`variants[1] (b).notice: unknown notice mode "footer" (want none, append or header)`}},
		{name: "a notice on a route without revision", yaml: two("notice: none"), stages: stagesOn{"inject"}, want: []string{"variants[1] (b).notice: the route has no hidden revision"}},
		{name: "several problems are all reported", yaml: "name: e\ncontrol: z\nvariants: [{name: a, weight: 0}, {name: b, weight: 1, top_p: 2}]", want: []string{"variants[0] (a).weight", "variants[1] (b).top_p", `control: no variant named "z"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			deps := testDeps(t)
			deps.Resolve = func(p string) string { return filepath.Join(dir, p) }
			st := allStages
			if tc.stages != nil {
				st = tc.stages
			}
			e, err := New(decodeConfig(t, tc.yaml), deps, st)
			if err == nil {
				t.Fatalf("New accepted the config (%d variants)", len(e.variants))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

func TestUnknownKeysFailToDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml, want string
	}{
		{name: "in the experiment", yaml: "name: e\ncontrol: a\nweights: [1, 1]\n", want: "field weights not found"},
		{name: "in a variant", yaml: "name: e\ncontrol: a\nvariants:\n  - {name: a, weight: 1, temprature: 0.2}\n", want: "field temprature not found"},
		{name: "a severity that is not one", yaml: "name: e\ncontrol: a\nvariants:\n  - {name: a, weight: 1, revision_threshold: severe}\n", want: `unknown severity "severe"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var cfg Config
			dec := yaml.NewDecoder(bytes.NewReader([]byte(tc.yaml)))
			dec.KnownFields(true)
			err := dec.Decode(&cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDefaultsAndFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, text := range map[string]string{"custom.md": "自定义提示。\n", "rules.md": "- 只引用录像里的操作。\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deps := testDeps(t)
	deps.Resolve = func(p string) string { return filepath.Join(dir, p) }
	e, err := New(decodeConfig(t, `
name: files
control: a
variants:
  - {name: a, weight: 1}
  - {name: b, weight: 1, use_custom_system_prompt: true, custom_system_prompt_file: custom.md, additional_rules_file: rules.md}
`), deps, allStages)
	if err != nil {
		t.Fatal(err)
	}
	if e.salt != "files" || e.ttl != DefaultCountersTTL || e.allowForcing {
		t.Errorf("salt %q ttl %s forcing %v: want the name, 30 days, off", e.salt, e.ttl, e.allowForcing)
	}
	o := e.byName["b"].overrides
	if o.CustomPrompt == nil || *o.CustomPrompt != "自定义提示。\n" || o.AdditionalRules == nil || *o.AdditionalRules != "- 只引用录像里的操作。\n" {
		t.Errorf("the files were not read into the overrides: %v %v", o.CustomPrompt, o.AdditionalRules)
	}
	if o := e.byName["a"].overrides; (o != interceptors.Overrides{Variant: "a", Experiment: "files"}) {
		t.Errorf("a variant without overrides carries %+v", o)
	}
}

func TestNoticeOverrideNeedsThePacksNoticeTemplate(t *testing.T) {
	t.Parallel()
	deps := testDeps(t)
	pack := *deps.Pack
	rev := *pack.Revision
	rev.NoticeTmpl = nil
	pack.Revision = &rev
	deps.Pack = &pack
	cfg := "name: e\ncontrol: a\nvariants:\n  - {name: a, weight: 1}\n  - {name: b, weight: 1, notice: header}\n"
	_, err := New(decodeConfig(t, cfg), deps, allStages)
	if err == nil || !strings.Contains(err.Error(), "variants[1] (b).notice: header needs a notice template, and pack ra3 has none") {
		t.Fatalf("New = %v, want the missing notice template named", err)
	}
	if _, err := New(decodeConfig(t, strings.Replace(cfg, "notice: header", "notice: none", 1)), deps, allStages); err != nil {
		t.Fatalf("notice: none needs no template, got %v", err)
	}
}
