package facts

import (
	"strings"
	"testing"
)

func TestSourceKey(t *testing.T) {
	t.Parallel()
	log := replay(t, "mcv_vs_miner.txt")
	base := SourceKey("v1", log)
	if len(base) != 32 || strings.Trim(base, "0123456789abcdef") != "" {
		t.Fatalf("key %q is not 32 hex digits", base)
	}
	tests := []struct {
		name    string
		version string
		texts   []string
		same    bool
	}{
		{"same text", "v1", []string{log}, true},
		{"CRLF", "v1", []string{strings.ReplaceAll(log, "\n", "\r\n")}, true},
		{"trailing and leading blanks", "v1", []string{strings.TrimSuffix(strings.ReplaceAll(log, "\n", " \t\n  "), "  ")}, true},
		{"blanks after the last line make one more line", "v1", []string{strings.ReplaceAll(log, "\n", " \t\n  ")}, false},
		{"no final newline", "v1", []string{strings.TrimSuffix(log, "\n")}, true},
		{"split into messages at a line break", "v1", strings.SplitAfterN(log, "\n", 2), true},
		{"other rules version", "v2", []string{log}, false},
		{"one operation changed", "v1", []string{strings.Replace(log, "[UnitId]587", "[UnitId]588", 1)}, false},
		{"a prose line added (shifts line numbers)", "v1", []string{"Analyse this:\n" + log}, false},
		{"an empty line added", "v1", []string{"\n" + log}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := SourceKey(tc.version, tc.texts...); (got == base) != tc.same {
				t.Errorf("SourceKey = %s, base %s; want same = %v", got, base, tc.same)
			}
		})
	}
}

// TestSourceKeyImpliesSameIndex checks the key's promise on the variations it
// treats as equal: the extracted indexes answer alike.
func TestSourceKeyImpliesSameIndex(t *testing.T) {
	t.Parallel()
	log := replay(t, "allied_vs_soviet.txt")
	variant := strings.ReplaceAll(log, "\n", "  \r\n")
	if SourceKey("v", log) != SourceKey("v", variant) {
		t.Fatal("keys differ")
	}
	sameAnswers(t, extract(t, log), extract(t, variant))
}
