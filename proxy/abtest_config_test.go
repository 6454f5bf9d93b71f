package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestABrokenExperimentStopsTheStart: every kind of broken experiment is caught by
// factgate config check (and so by serve) before the first request, with the
// file, the route and the key in the message.
func TestABrokenExperimentStopsTheStart(t *testing.T) {
	t.Parallel()
	route := func(experiment string) string {
		return `
upstreams:
  mock: {base_url: "http://127.0.0.1:1"}
routes:
  - name: ra3
    models: [ra3-analyst]
    upstream: mock
    pack: ra3
    inject: {}
    validate: {}
    experiment:
` + experiment
	}
	const variants = `      variants:
        - {name: baseline, weight: 1}
`
	tests := []struct {
		name   string
		config string
		want   []string
	}{
		{name: "an unknown key", config: route("      name: e\n      control: baseline\n" + variants + "        - {name: strict, weight: 1, temprature: 0.2}\n"),
			want: []string{"experiment.yaml", "experiment.variants[1] (strict).temprature: unknown key (did you mean temperature?)"}},
		{name: "a zero weight", config: route("      name: e\n      control: baseline\n" + variants + "        - {name: strict, weight: 0}\n"),
			want: []string{"experiment.yaml", "routes[0] (ra3).experiment: variants[1] (strict).weight: 0 must be a number greater than 0"}},
		{name: "a missing prompt file, relative to the config", config: route("      name: e\n      control: baseline\n" + variants + "        - {name: strict, weight: 1, additional_rules_file: rules/strict.md}\n"),
			want: []string{"routes[0] (ra3).experiment: variants[1] (strict).additional_rules_file: open ", filepath.Join("rules", "strict.md") + ": no such file or directory"}},
		{name: "an unknown knowledge set", config: route("      name: e\n      control: baseline\n" + variants + "        - {name: strict, weight: 1, knowledge_set: ra3-uprising}\n"),
			want: []string{`routes[0] (ra3).experiment: variants[1] (strict).knowledge_set: no knowledge set named "ra3-uprising" (pack ra3 has: ra3, ra3-corona)`}},
		{name: "a control that is not a variant", config: route("      name: e\n      control: champion\n" + variants + "        - {name: strict, weight: 1}\n"),
			want: []string{`routes[0] (ra3).experiment: control: no variant named "champion" (variants: baseline, strict)`}},
		{name: "a single variant", config: route("      name: e\n      control: baseline\n" + variants),
			want: []string{"routes[0] (ra3).experiment: variants: an experiment needs at least two variants (it has 1)"}},
		{name: "an override the route cannot honour", config: strings.Replace(route("      name: e\n      control: baseline\n"+variants+"        - {name: strict, weight: 1, additional_rules: x}\n"), "    inject: {}\n", "", 1),
			want: []string{"routes[0] (ra3).experiment: variants[1] (strict).additional_rules: the route has no inject block"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "experiment.yaml")
			if err := os.WriteFile(path, []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := CheckConfig(path)
			if err == nil {
				t.Fatal("the config was accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nlacks %q", err, w)
				}
			}
		})
	}
}
