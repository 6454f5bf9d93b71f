package validate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// fixtureCase is one file of testdata/cases (a copy of fixtures/ra3/cases).
type fixtureCase struct {
	ID             string   `json:"id"`
	Replay         string   `json:"replay"`
	ReplaySegments []string `json:"replay_segments"`
	Answer         string   `json:"answer"`
	Threshold      string   `json:"threshold"`
	Note           string   `json:"note"`
	Expect         []struct {
		Code     string `json:"code"`
		Severity string `json:"severity"`
		Path     string `json:"path"`
	} `json:"expect"`
}

func loadCases(tb testing.TB) []fixtureCase {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "cases", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no cases in testdata/cases: %v", err)
	}
	var out []fixtureCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var c fixtureCase
		if err := json.Unmarshal(data, &c); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		out = append(out, c)
	}
	return out
}

func replayText(tb testing.TB, name string) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "replays", name))
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

func (c fixtureCase) segments(tb testing.TB) []string {
	names := c.ReplaySegments
	if c.Replay != "" {
		names = []string{c.Replay}
	}
	var out []string
	for _, n := range names {
		out = append(out, replayText(tb, n))
	}
	return out
}

var (
	registryOnce sync.Once
	registry     *knowledge.Registry
	registryErr  error
)

func builtin(tb testing.TB) *knowledge.Registry {
	tb.Helper()
	registryOnce.Do(func() { registry, registryErr = knowledge.Builtin() })
	if registryErr != nil {
		tb.Fatal(registryErr)
	}
	return registry
}

func ra3Pack(tb testing.TB) *knowledge.Pack {
	tb.Helper()
	p := builtin(tb).Pack("ra3")
	if p == nil {
		tb.Fatal("no built-in ra3 pack")
	}
	return p
}

func newOffline(tb testing.TB, cfg Config) *Offline {
	tb.Helper()
	reg := builtin(tb)
	o, err := NewOffline(reg.Packs(), reg.Set, OfflineOptions{Config: cfg})
	if err != nil {
		tb.Fatal(err)
	}
	return o
}

// keys renders issues at or above min as sorted "code|severity|path" strings.
func keys(issues []interceptors.Issue, min interceptors.Severity) []string {
	out := []string{}
	for _, is := range issues {
		if is.Severity >= min {
			out = append(out, is.Key())
		}
	}
	slices.Sort(out)
	return out
}

// TestFixtureCases runs every case of fixtures/ra3/cases through the code path of
// `factgate check` and asserts its rule: the issues at or above its threshold are
// exactly its expect list.
func TestFixtureCases(t *testing.T) {
	t.Parallel()
	off := newOffline(t, Config{})
	for _, c := range loadCases(t) {
		t.Run(c.ID, func(t *testing.T) {
			t.Parallel()
			min, err := interceptors.ParseSeverity(c.Threshold)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := off.Check(CheckRequest{Facts: c.segments(t), Answer: c.Answer})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{}
			for _, e := range c.Expect {
				want = append(want, e.Code+"|"+e.Severity+"|"+e.Path)
			}
			slices.Sort(want)
			if got := keys(rep.Issues, min); !slices.Equal(got, want) {
				var b strings.Builder
				for _, is := range rep.Issues {
					b.WriteString("\n  " + is.Key() + ": " + is.Message)
				}
				t.Fatalf("%s\nissues at or above %s:\n got  %v\n want %v\nall issues:%s", c.Note, min, got, want, b.String())
			}
		})
	}
}
