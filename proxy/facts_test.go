package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/interceptors/validate"
)

// factsConfig is a proxy with one RA3 route with the facts stage; %MOCK% is the
// mock upstream, %CACHE% the cache block, %ROUTE% more of the route's blocks.
const factsConfig = `
server:
  max_request_body: 4MiB
upstreams:
  mock:
    base_url: "%MOCK%"
    read_timeout: 5s
%CACHE%
routes:
  - name: ra3
    models: [ra3-analyst]
    upstream: mock
    pack: ra3
    facts: {}
%ROUTE%
`

// factsValidating makes the facts route validate, with the mock answering c17's
// answer to every request.
var factsValidating = factsRoute{blocks: "    validate: {}", script: "default:\n  content_file: testdata/facts/c17_answer.txt\n"}

// factsRoute is what a facts test adds to the route: blocks (YAML at the route's
// indentation) and the mock's script.
type factsRoute struct{ blocks, script string }

// factsProbe is the innermost interceptor of a test route: its response phase
// waits for the fact index as the validator does and records what it got.
type factsProbe struct {
	mu   sync.Mutex
	seen []factsProbed
}

type factsProbed struct {
	ix   *facts.Index
	info facts.Info
	err  error
}

func (*factsProbe) Name() string { return "facts-probe" }

func (p *factsProbe) OnResponse(_ context.Context, ex *interceptors.Exchange) error {
	ix, info, err := facts.FromExchange(ex)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, factsProbed{ix, info, err})
	return nil
}

func (p *factsProbe) last(t *testing.T) factsProbed {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.seen) == 0 {
		t.Fatal("the probe saw no request")
	}
	return p.seen[len(p.seen)-1]
}

func (p *factsProbe) all() []factsProbed {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// withFactsProbe appends probe to the chain the config built for route, which
// must include the facts stage. Until the context stage is a configured stage, a
// context resolver is put in front so that the session header is read.
func withFactsProbe(route string, probe *factsProbe) Option {
	return func(s *Server) error {
		s.late = append(s.late, func(s *Server) error {
			rt := s.routeByName[route]
			chain := slices.Clone(rt.chain)
			names := make([]string, len(chain))
			for i, ic := range chain {
				names[i] = ic.Name()
			}
			if !slices.Contains(names, "facts") {
				return fmt.Errorf("route %s: the config built no facts stage (chain %v)", route, names)
			}
			if !slices.Contains(names, "context") {
				deps := s.deps(route)
				deps.Pack = s.library.Registry().Pack("ra3")
				resolver, err := reqcontext.New(nil, deps)
				if err != nil {
					return err
				}
				chain = append([]interceptors.Interceptor{resolver}, chain...)
			}
			rt.setChain(append(chain, probe))
			return nil
		})
		return nil
	}
}

// newFactsHarness starts a mock and a proxy with factsConfig, cacheBlock and the
// route's extras (optional).
func newFactsHarness(t *testing.T, cacheBlock string, probe *factsProbe, route ...factsRoute) *harness {
	t.Helper()
	var extra factsRoute
	if len(route) > 0 {
		extra = route[0]
	}
	cfg := strings.NewReplacer("%CACHE%", cacheBlock, "%ROUTE%", extra.blocks).Replace(factsConfig)
	return newHarness(t, extra.script, cfg, withFactsProbe("ra3", probe))
}

// factsChat sends one chat completion with text as its user message, in session (""
// = none), fails the test unless it succeeds, and returns the response headers.
func (h *harness) factsChat(t testing.TB, text, session string) http.Header {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"model":    "ra3-analyst",
		"messages": []map[string]string{{"role": "user", "content": text}},
	})
	var header []string
	if session != "" {
		header = []string{reqcontext.HeaderSession, session}
	}
	status, respHeader, resp := h.post(t, "/v1/chat/completions", string(body), header...)
	if status != 200 {
		t.Fatalf("chat completion: status %d: %s", status, resp)
	}
	return respHeader
}

// draftIssuesAtLeastWeak returns the draft's issue counts from X-Factgate-Issues
// ("draft=C1,E1;final=0;delivered=0") without the Info ones: "" when the draft had no issue at
// or above WeakEvidence.
func draftIssuesAtLeastWeak(t *testing.T, header http.Header) string {
	t.Helper()
	v := header.Get(validate.HeaderIssues)
	draft, _, ok := strings.Cut(strings.TrimPrefix(v, "draft="), ";")
	if !ok || !strings.HasPrefix(v, "draft=") {
		t.Fatalf("%s: %q, want draft=...;final=...;delivered=...", validate.HeaderIssues, v)
	}
	var severe []string
	for _, c := range strings.Split(draft, ",") {
		if c != "0" && !strings.HasPrefix(c, "I") {
			severe = append(severe, c)
		}
	}
	return strings.Join(severe, ",")
}

// counter returns the value of a counter with the given labels in the server's
// registry (0 when absent).
func factsCounter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			}
			if hg := m.GetHistogram(); hg != nil {
				sum += float64(hg.GetSampleCount())
			}
		}
	}
	return sum
}

func factsPart(t *testing.T, n int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "facts", fmt.Sprintf("allied_vs_soviet.part%d.txt", n)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// factsPackAt124 is c17's citation: base 246 packed up at 1:24, seen only in part 1.
var factsPackAt124 = facts.Evidence{Type: "power", At: 84 * time.Second, Params: []string{"SpecialPower_PackReplaceSelf", "246"}}

func TestFactsStageWiring(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		route   string // the route's interceptor blocks
		want    bool   // the chain has a facts stage
		wantErr string
	}{
		{name: "facts block", route: "pack: ra3\n    facts: {}", want: true},
		{name: "facts block with settings", route: "pack: ra3\n    facts: {memory_bytes: 64MiB, ttl: 2h, session_ttl: 1h, max_bytes: 8MiB, max_session_segments: 8}", want: true},
		{name: "validating route", route: "pack: ra3\n    validate: {}", want: true},
		{name: "pack alone", route: "pack: ra3", want: false},
		{name: "facts block without a pack", route: "facts: {}", wantErr: "routes[0] (r).facts: the route names no pack"},
		{name: "facts block for a pack without fact rules", route: "pack: dnd\n    facts: {}", wantErr: `routes[0] (r).facts: pack "dnd" has no fact rules`},
		{name: "bad facts setting", route: "pack: ra3\n    facts: {max_session_segments: -1}", wantErr: "routes[0] (r).facts: max_session_segments: -1 is negative"},
		{name: "unknown facts key", route: "pack: ra3\n    facts: {memory: 1MiB}", wantErr: "facts.yaml:9: routes[0] (r).facts.memory: unknown key (did you mean memory_bytes?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			yaml := "upstreams:\n  mock:\n    base_url: http://127.0.0.1:1/v1\nroutes:\n  - name: r\n    models: [m]\n    upstream: mock\n    " + tt.route + "\n"
			cfg, err := ParseConfig([]byte(yaml), "facts.yaml")
			var srv *Server
			if err == nil {
				srv, err = New(cfg)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, c := range srv.closers {
					_ = c()
				}
			})
			var names []string
			for _, ic := range srv.routeByName["r"].chain {
				names = append(names, ic.Name())
			}
			if got := slices.Contains(names, "facts"); got != tt.want {
				t.Fatalf("chain %v: facts stage %v, want %v", names, got, tt.want)
			}
		})
	}
}

// TestFactsThroughProxy runs the facts stage behind the proxy with the default
// in-memory cache: a repeated log is not rebuilt, and a session's segments are
// merged.
func TestFactsThroughProxy(t *testing.T) {
	t.Parallel()
	probe := &factsProbe{}
	h := newFactsHarness(t, "", probe)
	reg := h.srv.Metrics()

	h.factsChat(t, factsPart(t, 1), "")
	h.factsChat(t, factsPart(t, 1), "")
	seen := probe.all()
	if len(seen) != 2 || seen[0].info.Source != facts.SourceBuilt || seen[1].info.Source != facts.SourceMemory {
		t.Fatalf("sources of a repeated log: %+v", seen)
	}
	if seen[0].info.Key == "" || seen[0].info.Key != seen[1].info.Key || !seen[1].ix.HasFacts() {
		t.Fatalf("keys %q, %q", seen[0].info.Key, seen[1].info.Key)
	}
	if got := factsCounter(t, reg, "factgate_fact_index_total", map[string]string{"route": "ra3", "source": "built"}); got != 1 {
		t.Errorf("factgate_fact_index_total{source=built} = %v, want 1", got)
	}
	if got := factsCounter(t, reg, "factgate_fact_index_build_seconds", nil); got != 1 {
		t.Errorf("factgate_fact_index_build_seconds count = %v, want 1", got)
	}

	for part := 1; part <= 3; part++ {
		h.factsChat(t, factsPart(t, part), "c17-memory")
	}
	last := probe.last(t)
	if last.err != nil || last.info.Segments != 3 || last.info.Session != "c17-memory" {
		t.Fatalf("part 3 of the session: %+v, %v", last.info, last.err)
	}
	if _, ok := last.ix.Match(factsPackAt124, 500*time.Millisecond); !ok {
		t.Error("the index used for part 3 lacks part 1's facts")
	}
}
