package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/factgate/factgate/configs/units"
)

// blockConfig has every shape a stage's config takes: nested structs, slices
// and maps of them, an inline struct, a type that decodes itself.
type blockConfig struct {
	Name        string                `yaml:"name"`
	Timeout     units.Duration        `yaml:"timeout"`
	Items       []blockItem           `yaml:"items"`
	ByName      map[string]*blockItem `yaml:"by_name"`
	Any         map[string]any        `yaml:"any"`
	Skipped     bool                  `yaml:"-"`
	blockInline `yaml:",inline"`
}

type blockItem struct {
	Weight float64 `yaml:"weight"`
}

type blockInline struct {
	Extra string `yaml:"extra"`
}

// TestBlocksDecodeStrictly: a stage's block is decoded as strictly as the rest of
// the file — an unknown key anywhere in it is named with its line and path —
// and a block written as null is no block.
func TestBlocksDecodeStrictly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string // the route's "stage:" block, at four spaces
		want []string
	}{
		{name: "every key known", yaml: "name: a\n      timeout: 2s\n      extra: x\n      items: [{weight: 1}]\n      by_name: {b: {weight: 2}}\n      any: {whatever: {deep: 1}}"},
		{name: "a key of the block", yaml: "nam: a", want: []string{"line 8: stage.nam: unknown key (did you mean name?)"}},
		{name: "a key of a list item", yaml: "items:\n        - {weight: 1}\n        - {wieght: 2}", want: []string{"line 10: stage.items[1].wieght: unknown key (did you mean weight?)"}},
		{name: "a key of a map value", yaml: "by_name: {b: {wait: 1}}", want: []string{"line 8: stage.by_name.b.wait: unknown key (known keys: weight)"}},
		{name: "a key tagged out of YAML", yaml: "skipped: true", want: []string{"stage.skipped: unknown key"}},
		{name: "a key reached through an alias", yaml: "items: [&w {weight: 1, heavy: true}, *w, *w]", want: []string{"line 8: stage.items[0].heavy: unknown key"}},
		{name: "a key merged in", yaml: "<<: {nam: a}", want: []string{"stage.nam: unknown key (did you mean name?)"}},
		{name: "an unknown key and a bad value", yaml: "nam: a\n      timeout: 3", want: []string{"line 8: stage.nam: unknown key", `line 9: stage.timeout: bad duration "3"`}},
		{name: "a type error", yaml: "items: 3", want: []string{"line 8: stage.items: want a list, got `3`"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := ParseConfig([]byte("upstreams:\n  u: {base_url: 'http://x/v1'}\nroutes:\n  - name: r\n    default: true\n    upstream: u\n    stage:\n      "+tc.yaml+"\n"), "blocks.yaml")
			if err != nil {
				t.Fatal(err)
			}
			rc := &cfg.Routes[0]
			var got blockConfig
			has, err := rc.DecodeBlock("stage", &got)
			if !has {
				t.Fatal("the route has no stage block")
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if got.Name != "a" || got.Timeout != units.Duration(2*time.Second) || got.Extra != "x" || got.ByName["b"].Weight != 2 {
					t.Fatalf("decoded %+v", got)
				}
				return
			}
			if err == nil {
				t.Fatalf("decoded %+v without an error", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}

	cfg, err := ParseConfig([]byte("upstreams:\n  u: {base_url: 'http://x/v1'}\nroutes:\n  - {name: r, default: true, upstream: u, inject: ~, validate: {}}\n"), "blocks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc := &cfg.Routes[0]
	if rc.HasBlock("inject") || !rc.HasBlock("validate") || rc.HasBlock("facts") {
		t.Fatalf("blocks inject %v (null: none), validate %v, facts %v (absent)", rc.HasBlock("inject"), rc.HasBlock("validate"), rc.HasBlock("facts"))
	}
	var v blockConfig
	v.Name = "default"
	if has, err := rc.DecodeBlock("inject", &v); has || err != nil || v.Name != "default" {
		t.Fatalf("a null block decoded: %v %v %+v", has, err, v)
	}
}
