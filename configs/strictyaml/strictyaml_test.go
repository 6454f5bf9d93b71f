package strictyaml

import (
	"errors"
	"strings"
	"testing"
	"time"
)

type server struct {
	Listen  string        `yaml:"listen"`
	Depth   int           `yaml:"max_json_depth"`
	Timeout time.Duration `yaml:"read_timeout"`
	Tags    []string      `yaml:"tags"`
}

type item struct {
	Name   string `yaml:"name"`
	Weight int    `yaml:"weight"`
}

type doc struct {
	Server server          `yaml:"server"`
	Items  []item          `yaml:"items"`
	ByName map[string]item `yaml:"by_name"`
	Any    map[string]any  `yaml:"any"`
}

func TestDecodeNamesThePathTheLineAndTheKeyMeant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		want       []string // one line of the error each, in order
	}{
		{name: "a typo", yaml: "server:\n  listn: x\n", want: []string{"f.yaml:2: server.listn: unknown key (did you mean listen?)"}},
		{name: "a swapped pair", yaml: "server: {lsiten: x}\n", want: []string{"f.yaml:1: server.lsiten: unknown key (did you mean listen?)"}},
		{name: "a longer name holding the key", yaml: "server: {listen_addr: x}\n", want: []string{"f.yaml:1: server.listen_addr: unknown key (did you mean listen?)"}},
		{name: "nothing near", yaml: "server: {colour: red}\n", want: []string{"f.yaml:1: server.colour: unknown key (known keys: listen, max_json_depth, read_timeout, tags)"}},
		{name: "a named list item", yaml: "items:\n  - {name: a, weight: 1}\n  - {name: b, wieght: 2}\n", want: []string{"f.yaml:3: items[1] (b).wieght: unknown key (did you mean weight?)"}},
		{name: "a map value", yaml: "by_name:\n  x: {wait: 1}\n", want: []string{"f.yaml:2: by_name.x.wait: unknown key (known keys: name, weight)"}},
		{name: "any keys under an interface", yaml: "any: {whatever: {deep: 1}}\n"},
		{name: "an alias is named once", yaml: "items: [&w {name: a, heavy: true}, *w, *w]\n", want: []string{"f.yaml:1: items[0] (a).heavy: unknown key (known keys: name, weight)"}},
		{name: "a wrong type", yaml: "server:\n  max_json_depth: deep\n", want: []string{"f.yaml:2: server.max_json_depth: want a whole number, got `deep`"}},
		{name: "a wrong type in a flow mapping", yaml: "server: {listen: x, max_json_depth: deep}\n", want: []string{"f.yaml:1: server.max_json_depth: want a whole number, got `deep`"}},
		{name: "a list for a mapping", yaml: "server: [1, 2]\n", want: []string{"f.yaml:1: server: want a mapping, got a list"}},
		{name: "a duration", yaml: "server: {read_timeout: soon}\n", want: []string{"f.yaml:1: server.read_timeout: want a duration (500ms, 30s, 2m), got `soon`"}},
		{name: "every problem, in line order", yaml: "server:\n  listn: x\n  max_json_depth: deep\nitems: [{nmae: a}]\n", want: []string{
			"f.yaml:2: server.listn: unknown key (did you mean listen?)",
			"f.yaml:3: server.max_json_depth: want a whole number, got `deep`",
			"f.yaml:4: items[0].nmae: unknown key (did you mean name?)",
		}},
		{name: "not YAML", yaml: "server: [\n", want: []string{"f.yaml:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var d doc
			err := Decode([]byte(tc.yaml), "f.yaml", &d)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("decoded %+v without an error", d)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%T %v, want an *Error", err, err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("the error has %d lines, want %d:\n%s", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %d of the error is\n  %s\nwant\n  %s", i+1, lines[i], w)
				}
			}
		})
	}
}

func TestAnEmptyDocumentIsErrEmpty(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"", "# only a comment\n"} {
		var d doc
		if err := Decode([]byte(text), "f.yaml", &d); !errors.Is(err, ErrEmpty) {
			t.Errorf("Decode(%q) = %v, want ErrEmpty", text, err)
		}
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	known := []string{"listen", "metrics_listen", "max_request_body", "read_timeout", "retry", "access"}
	for key, want := range map[string]string{
		"listn":          "listen",
		"metrics_listn":  "metrics_listen",
		"max_req_body":   "max_request_body",
		"retries":        "retry",
		"access_log":     "access",
		"read_timeout_s": "read_timeout",
		"colour":         "",
		"x":              "",
	} {
		if got := Nearest(key, known); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", key, got, want)
		}
	}
}
