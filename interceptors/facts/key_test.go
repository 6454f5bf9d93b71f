package facts

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/factgate/factgate/interceptors/reqcontext"
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

// TestSourceKeyGolden pins fact keys for known inputs: they name indexes in the
// shared cache, read by other replicas and versions, so a change to how a key is
// computed — or to the request path that finds it (the memo, the decoding of the
// body) — must not change its value. The encoding's format version is part of
// the key: version 2 (JSON records) gave these values.
func TestSourceKeyGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ file, want string }{
		{"mcv_vs_miner.txt", "d89bc6eddd8f0296fc734bb91f3f2a9d"},
		{"allied_vs_soviet.large.txt", "c8b3f0be8280860d74f14e8764959601"},
	} {
		if got := SourceKey("v1", replay(t, tc.file)); got != tc.want {
			t.Errorf("SourceKey(v1, %s) = %s, want %s", tc.file, got, tc.want)
		}
	}
	// The stage's key of a request, computed and then from the memo.
	s := newStage(t, nil, Config{})
	body := chatBody(t, replay(t, "mcv_vs_miner.txt"))
	const want = "00d2d78595c9af3b07a090f035ecf42f" // under rules version ra3-facts-test-1
	for round := range 2 {
		_, info, err := requestOn(t.Context(), s, body)
		if err != nil || info.Key != want {
			t.Fatalf("round %d: key %q (%v), want %s", round, info.Key, err, want)
		}
	}
}

// TestSourceNote: the note built in one buffer reads as the fmt.Sprintf it
// replaced, for every source.
func TestSourceNote(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 7, 17797, -1} {
		for _, src := range []string{SourceMemory, SourceShared, SourceBuilt} {
			build := 1234567 * time.Nanosecond
			want := fmt.Sprintf("facts: %d operations from %s (key %s)", n, sourceText(src, build), "046860436f043c8dbb864d6c61a68bbc")
			if got := sourceNote(n, src, build, "046860436f043c8dbb864d6c61a68bbc"); got != want {
				t.Errorf("sourceNote = %q, want %q", got, want)
			}
		}
	}
}

// TestDigestOfFoundMessages: the memo's digest of a body is the same whether the
// job finds its messages or is given the context stage's scan of them.
func TestDigestOfFoundMessages(t *testing.T) {
	t.Parallel()
	m := newKeyMemo(4)
	for _, body := range [][]byte{
		chatBody(t, replay(t, "mcv_vs_miner.txt")),
		chatBody(t, "0:01.00 a", "0:02.00 b"),
		[]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"0:02.10 A"}]}]}`),
		[]byte(`{"messages":[]}`),
		[]byte(`{"model":"m"}`),
	} {
		want, wok := m.digest(body, foundMessages{})
		list, found := reqcontext.FindMessages(body)
		got, gok := m.digest(body, foundMessages{list: list, found: found, known: true})
		if got != want || gok != wok {
			t.Errorf("%s: digest %v %v with the scan, %v %v without", body, got, gok, want, wok)
		}
	}
}
