package claims

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

const ra3Marker = "[机器可读声明]"

// ra3Contract mirrors the RA3 pack's claims contract.
func ra3Contract() *knowledge.ClaimsContract {
	return &knowledge.ClaimsContract{
		Marker: ra3Marker,
		Caps:   map[string]int{UnitClaimsField: 10, EventClaimsField: 5, TimelineClaimsField: 3},
		Levels: map[string][]string{
			"confirmed":     {"确认"},
			"highly likely": {"很可能"},
			"possible":      {"可能"},
			"uncertain":     {"不确定"},
			"ruled out":     {"排除"},
		},
	}
}

// ra3Evidence mirrors the RA3 pack's structured evidence types (OPLOG.md).
func ra3Evidence() map[string][]string {
	return map[string][]string{
		"build":   {"asset", "unit"},
		"place":   {"asset", "unit", "pos"},
		"produce": {"asset", "unit"},
		"sell":    {"unit"},
		"select":  {"unit"},
		"move":    {"pos"},
		"power":   {"power", "unit"},
	}
}

func newRA3Parser(tb testing.TB) *Parser {
	tb.Helper()
	p, err := NewParser(ra3Contract(), ra3Evidence())
	if err != nil {
		tb.Fatalf("NewParser: %v", err)
	}
	return p
}

// fixtureCase is one RA3 validation case (testdata/cases, copied from the shared
// fixtures).
type fixtureCase struct {
	ID        string `json:"id"`
	Answer    string `json:"answer"`
	Threshold string `json:"threshold"`
	Expect    []struct {
		Code     string `json:"code"`
		Severity string `json:"severity"`
		Path     string `json:"path"`
	} `json:"expect"`
}

func loadCases(tb testing.TB) []fixtureCase {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "cases", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no fixture cases in testdata/cases: %v", err)
	}
	sort.Strings(files)
	cases := make([]fixtureCase, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var c fixtureCase
		if err := json.Unmarshal(b, &c); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		cases = append(cases, c)
	}
	return cases
}

func loadCase(tb testing.TB, id string) fixtureCase {
	tb.Helper()
	for _, c := range loadCases(tb) {
		if c.ID == id {
			return c
		}
	}
	tb.Fatalf("no fixture case %q", id)
	return fixtureCase{}
}

// issueKeys renders issues as sorted "code|Severity|path" keys.
func issueKeys(issues []interceptors.Issue) []string {
	keys := make([]string, 0, len(issues))
	for _, is := range issues {
		keys = append(keys, is.Key())
	}
	sort.Strings(keys)
	return keys
}

func joinKeys(keys []string) string { return strings.Join(keys, "\n") }

// fence wraps a JSON text in a ```json block after the RA3 marker.
func fenced(prose, body string) string {
	return prose + "\n\n" + ra3Marker + "\n```json\n" + body + "\n```\n"
}
