package abtest

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// headers is a request's headers for tests (names in any case).
type headers map[string]string

func (h headers) Peek(name string) []byte {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return []byte(v)
		}
	}
	return nil
}

// decodeConfig decodes an experiment block strictly, as the proxy's config loader does.
func decodeConfig(t testing.TB, y string) Config {
	t.Helper()
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader([]byte(y)))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decoding the experiment: %v", err)
	}
	return cfg
}

// stagesOn is the view of a route whose chain has the named stages.
type stagesOn []string

func (s stagesOn) Stage(name string) interceptors.Interceptor {
	if slices.Contains(s, name) {
		return namedStage(name)
	}
	return nil
}

// namedStage is a stage that is only its name.
type namedStage string

func (n namedStage) Name() string { return string(n) }

// allStages is a route that injects, validates and revises.
var allStages = stagesOn{"inject", "validate", "revise"}

// newExperiment builds an experiment on route "ra3" with a memory cache.
func newExperiment(t testing.TB, y string) *Experiment {
	t.Helper()
	e, err := New(decodeConfig(t, y), testDeps(t), allStages)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// testDeps are the route's deps: the built-in ra3 pack and a memory cache.
func testDeps(t testing.TB) interceptors.Deps {
	t.Helper()
	lib := testLibrary(t)
	c := cache.NewMemory(cache.MemoryConfig{})
	t.Cleanup(func() { _ = c.Close() })
	return interceptors.Deps{Route: "ra3", Pack: lib.Registry().Pack("ra3"), Library: lib, Cache: c}
}

func testLibrary(t testing.TB) *knowledge.Library {
	t.Helper()
	reg, err := knowledge.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	lib, err := knowledge.NewLibrary(reg, knowledge.LibraryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lib.Close() })
	return lib
}

// exchange is a request as the proxy hands it to the chain.
func exchange(body string, h headers, clientKey string) *interceptors.Exchange {
	return &interceptors.Exchange{
		Route:     "ra3",
		Model:     "ra3-analyst",
		Original:  []byte(body),
		Body:      []byte(body),
		Header:    h,
		ClientKey: clientKey,
		Trace:     interceptors.NewTrace("ra3"),
	}
}

// assign runs the request phase and returns the variant the exchange got.
func assign(t testing.TB, e *Experiment, ex *interceptors.Exchange) string {
	t.Helper()
	if err := e.OnRequest(context.Background(), ex); err != nil {
		t.Fatalf("OnRequest: %v", err)
	}
	v, _, ok := Assigned(ex)
	if !ok {
		t.Fatal("no variant assigned")
	}
	return v
}

// twoVariants is a 50/50 experiment without overrides.
const twoVariants = `
name: prompt-test
control: a
variants:
  - {name: a, weight: 50}
  - {name: b, weight: 50}
`

// responseHeader returns the value the exchange sets for a response header.
func responseHeader(ex *interceptors.Exchange, name string) string {
	for _, h := range ex.ResponseHeaders {
		if h[0] == name {
			return h[1]
		}
	}
	return ""
}

// notes joins the trace's notes.
func notes(ex *interceptors.Exchange) string {
	var s string
	ex.Trace.Do(func(t *interceptors.Trace) { s = strings.Join(t.Notes, "\n") })
	return s
}
