package proxy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factgate/factgate/interceptors"
)

// withStages builds the chains from stages instead of chainStages: the one
// registration line a new stage adds there, made in a test.
func withStages(stages []interceptors.Stage) Option {
	return func(s *Server) error { s.stages = stages; return nil }
}

// stampConfig is the fake stage's block: `stamp: {header: X-Stamp, value: hi}`.
type stampConfig struct {
	Header string `yaml:"header"`
	Value  string `yaml:"value"`
}

// stamp is a stage as a new stage package would write it: its own config
// block, a requirement, a look at the stage inside it (whether the route
// validates), a request phase and a Cleanup.
type stamp struct {
	header, value string
	cleanups      *atomic.Int32
}

func (s *stamp) Name() string { return "stamp" }

func (s *stamp) OnRequest(_ context.Context, ex *interceptors.Exchange) error {
	ex.ResponseHeaders = append(ex.ResponseHeaders, [2]string{s.header, s.value})
	return nil
}

func (s *stamp) Cleanup(context.Context) error { s.cleanups.Add(1); return nil }

// stampStage describes the fake stage; cleanups counts its Cleanup calls.
func stampStage(cleanups *atomic.Int32) interceptors.Stage {
	return interceptors.Stage{
		Name:     "stamp",
		Requires: []string{"validate"},
		Build: func(b interceptors.BuildContext) (interceptors.Interceptor, error) {
			if !b.HasBlock() {
				return nil, nil
			}
			cfg := stampConfig{Header: "X-Stamp"}
			if err := b.Decode(&cfg); err != nil {
				return nil, err
			}
			if cfg.Value == "" {
				return nil, errors.New("value: missing")
			}
			v, _ := b.Stage("validate").(interceptors.ValidationPolicy)
			return &stamp{header: cfg.Header, value: cfg.Value + " (validates: " + strconv.FormatBool(v != nil && v.Validates()) + ")", cleanups: cleanups}, nil
		},
	}
}

// withStamp registers the stamp stage between semantic and validate, so that it
// sees the validate stage built.
func withStamp(cleanups *atomic.Int32) []interceptors.Stage {
	return slices.Insert(slices.Clone(chainStages), len(chainStages)-1, stampStage(cleanups))
}

const stampConfigText = `
upstreams:
  mock: {base_url: "%MOCK%"}
routes:
  - name: stamped
    models: [m]
    upstream: mock
    pack: dnd
%BLOCKS%
`

// TestAStageIsItsPackageAndOneRegistrationLine: a stage the proxy has never heard
// of, registered with one line, gets its block decoded strictly, its
// requirement checked, its place in the chain, a view of the stage inside it,
// and its Cleanup at Shutdown — with no other change to the proxy.
func TestAStageIsItsPackageAndOneRegistrationLine(t *testing.T) {
	t.Parallel()
	cleanups := &atomic.Int32{}
	cfg := strings.Replace(stampConfigText, "%BLOCKS%", "    validate: {}\n    stamp: {value: hi}", 1)
	h := newHarness(t, "", cfg, withStages(withStamp(cleanups)))

	var names []string
	for _, ic := range h.srv.routeByName["stamped"].chain {
		names = append(names, ic.Name())
	}
	// The dnd pack has no fact rules: the facts stage validate implies stays off.
	if want := []string{"context", "revise", "stamp", "validate"}; !slices.Equal(names, want) {
		t.Fatalf("chain %v, want %v", names, want)
	}
	status, hdr, body := h.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hello"}]}`)
	if status != 200 || hdr.Get("X-Stamp") != "hi (validates: true)" {
		t.Fatalf("status %d, X-Stamp %q: %s", status, hdr.Get("X-Stamp"), body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := cleanups.Load(); n != 1 {
		t.Fatalf("Shutdown called the stage's Cleanup %d times, want once (one route)", n)
	}
}

// TestAStageBlockIsCheckedLikeEveryOther: the fake stage's config mistakes are
// reported as a built-in stage's are, naming the file, the route, the block and
// the line; without its registration its block is an unknown key.
func TestAStageBlockIsCheckedLikeEveryOther(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		blocks     string
		unregister bool
		want       []string
	}{
		{name: "an unknown key", blocks: "    validate: {}\n    stamp: {valeu: hi}",
			want: []string{"stamp.yaml:10: routes[0] (stamped).stamp.valeu: unknown key (did you mean value?)"}},
		{name: "a value its Build refuses", blocks: "    validate: {}\n    stamp: {header: X-S}",
			want: []string{"stamp.yaml: routes[0] (stamped).stamp: value: missing"}},
		{name: "its requirement missing", blocks: "    stamp: {value: hi}",
			want: []string{"stamp.yaml: routes[0] (stamped).stamp: a stamp block needs the route's validate block"}},
		{name: "a block no stage owns", blocks: "    validate: {}\n    stmap: {value: hi}",
			want: []string{"stamp.yaml:10: routes[0] (stamped).stmap: unknown key (did you mean stamp?)"}},
		{name: "not registered", blocks: "    stamp: {value: hi}", unregister: true,
			want: []string{"routes[0] (stamped).stamp: unknown key: a route has", "stage blocks experiment, context, facts, inject, revise, semantic, validate"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			text := strings.NewReplacer("%MOCK%", "http://127.0.0.1:9/v1", "%BLOCKS%", tc.blocks).Replace(stampConfigText)
			path := filepath.Join(t.TempDir(), "stamp.yaml")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			stages := withStamp(&atomic.Int32{})
			if tc.unregister {
				stages = chainStages
			}
			_, err = New(cfg, withStages(stages))
			if err == nil {
				t.Fatal("the config was accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nlacks %q", err, w)
				}
			}
		})
	}
}

// TestTheStageGraphIsCheckedAtStartUp: a registration that names a stage that
// does not exist, or takes a route key's name, stops the start.
func TestTheStageGraphIsCheckedAtStartUp(t *testing.T) {
	t.Parallel()
	build := func(interceptors.BuildContext) (interceptors.Interceptor, error) { return nil, nil }
	tests := []struct {
		name  string
		stage interceptors.Stage
		want  string
	}{
		{"an unknown requirement", interceptors.Stage{Name: "stamp", Requires: []string{"validation"}, Build: build}, `stage stamp requires "validation", which is not another registered stage`},
		{"an unknown implied stage", interceptors.Stage{Name: "stamp", Implies: []string{"stamp"}, Build: build}, `stage stamp implies "stamp", which is not another registered stage`},
		{"a route key", interceptors.Stage{Name: "pack", Build: build}, `"pack" is a route key`},
		{"a name taken", interceptors.Stage{Name: "validate", Build: build}, "stage validate is registered twice"},
		{"no Build", interceptors.Stage{Name: "stamp"}, "stage stamp has no Build"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := ParseConfig([]byte(strings.NewReplacer("%MOCK%", "http://127.0.0.1:9/v1", "%BLOCKS%", "").Replace(stampConfigText)), "stamp.yaml")
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(cfg, withStages(append(slices.Clone(chainStages), tc.stage)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
