package facts

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// loadRules decodes testdata/ra3_facts.yaml, the test copy of the RA3 pack's fact
// rules, strictly (as the pack loader does).
func loadRules(tb testing.TB) *knowledge.FactRules {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ra3_facts.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var r knowledge.FactRules
	if err := dec.Decode(&r); err != nil {
		tb.Fatalf("decoding ra3_facts.yaml: %v", err)
	}
	return &r
}

var (
	extractorOnce sync.Once
	extractor     *Extractor
	extractorErr  error
)

// ra3 returns the extractor of the test rules, shared by the tests.
func ra3(tb testing.TB) *Extractor {
	tb.Helper()
	extractorOnce.Do(func() { extractor, extractorErr = NewExtractor(loadRules(tb)) })
	if extractorErr != nil {
		tb.Fatal(extractorErr)
	}
	return extractor
}

func replay(tb testing.TB, name string) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "replays", name))
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

func extract(tb testing.TB, texts ...string) *Index {
	tb.Helper()
	ix, err := ra3(tb).ExtractTexts(texts...)
	if err != nil {
		tb.Fatal(err)
	}
	return ix
}

func extractReplay(tb testing.TB, name string) *Index {
	tb.Helper()
	return extract(tb, replay(tb, name))
}

// clock parses a game-clock time in a test table.
func clock(tb testing.TB, s string) time.Duration {
	tb.Helper()
	d, ok := interceptors.ParseClock(s)
	if !ok {
		tb.Fatalf("bad clock %q in test", s)
	}
	return d
}

var replayNames = []string{
	"allied_vs_soviet.txt",
	"allied_vs_soviet.large.txt",
	"allied_vs_soviet.part1.txt",
	"allied_vs_soviet.part2.txt",
	"allied_vs_soviet.part3.txt",
	"corona_celestial_vs_allied.txt",
	"mcv_vs_miner.txt",
}

func itoa(n int64) string   { return strconv.FormatInt(n, 10) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
