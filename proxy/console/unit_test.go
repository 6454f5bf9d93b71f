package console

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
)

func TestDiff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, old, new string
		want           []DiffOp
	}{
		{"equal", "a\nb\n", "a\nb\n", []DiffOp{{"eq", "a\nb\n"}}},
		{"both empty", "", "", []DiffOp{}},
		{"added line", "a\nc\n", "a\nb\nc\n", []DiffOp{{"eq", "a\n"}, {"ins", "b\n"}, {"eq", "c\n"}}},
		{"removed line", "a\nb\nc\n", "a\nc\n", []DiffOp{{"eq", "a\n"}, {"del", "b\n"}, {"eq", "c\n"}}},
		{"changed word", "PlayerA 在 6:02 出动世纪轰炸机 733\n", "PlayerA 在 5:30 生产了战斗机 733\n",
			[]DiffOp{{"eq", "PlayerA 在 "}, {"del", "6:02 出动世纪轰炸"}, {"ins", "5:30 生产了战斗"}, {"eq", "机 733\n"}}},
		{"from nothing", "", "### x\n- y", []DiffOp{{"ins", "### x\n- y"}}},
		{"to nothing", "### x\n", "", []DiffOp{{"del", "### x\n"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Diff(tc.old, tc.new)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Diff(%q, %q) = %v, want %v", tc.old, tc.new, got, tc.want)
			}
			var a, b strings.Builder
			for _, op := range got {
				if op.Op != "ins" {
					a.WriteString(op.Text)
				}
				if op.Op != "del" {
					b.WriteString(op.Text)
				}
			}
			if a.String() != tc.old || b.String() != tc.new {
				t.Errorf("the pieces do not rebuild the texts: %q %q", a.String(), b.String())
			}
		})
	}
}

// TestDiffBounded: two long texts with nothing in common cost no quadratic
// table beyond the bound; the passage is shown replaced whole.
func TestDiffBounded(t *testing.T) {
	t.Parallel()
	a := strings.Repeat("x\n", 3000)
	b := strings.Repeat("y\n", 3000)
	got := Diff(a, b)
	if len(got) != 3 || got[0].Op != "del" || got[1].Op != "ins" || got[0].Text+got[2].Text != a || got[1].Text+got[2].Text != b {
		t.Fatalf("got %d ops", len(got))
	}
}

func TestCaptureRequest(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model": "m", "stream": true, "messages": [
		{"role": "system", "content": "短"},
		{"role": "user", "content": "\u4f60\u597d\n\"quoted\" \ud83d\ude00 tail"},
		{"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "part two"}]}
	]}`)
	capture := func(limit int) *interceptors.TraceRequest {
		return CaptureRequest(&interceptors.Exchange{Original: body, Model: "m", Stream: true}, limit)
	}
	full := capture(1 << 10)
	if full.Model != "m" || !full.Stream || len(full.Messages) != 3 {
		t.Fatalf("%+v", full)
	}
	if m := full.Messages[1]; m.Content != "你好\n\"quoted\" 😀 tail" || m.Bytes != len(m.Content) || m.Truncated {
		t.Fatalf("decoded whole: %+v", m)
	}
	if m := full.Messages[2]; m.Content != "part one\npart two" || m.Truncated {
		t.Fatalf("text parts: %+v", m)
	}
	// Cut at 8 bytes: "你好\n" is 7, the quote escape decodes to 1 more.
	cut := capture(8)
	if m := cut.Messages[1]; m.Content != "你好\n\"" || !m.Truncated || m.Bytes != len("你好\n\"quoted\" 😀 tail") {
		t.Fatalf("cut: %+v", m)
	}
	// A cut inside a surrogate pair keeps the pair out whole.
	for n := 0; n < 30; n++ {
		m := capture(n).Messages[1]
		if len(m.Content) > n || strings.ContainsRune(m.Content, '\uFFFD') || !strings.HasPrefix("你好\n\"quoted\" 😀 tail", m.Content) {
			t.Fatalf("limit %d: %q", n, m.Content)
		}
	}
}

// TestUITextsComplete: every text key the pages use exists in English and in
// Chinese, and the two dictionaries have the same keys.
func TestUITextsComplete(t *testing.T) {
	t.Parallel()
	src, err := uiFS.ReadFile("ui/i18n.js")
	if err != nil {
		t.Fatal(err)
	}
	dict := func(name string) map[string]bool {
		start := strings.Index(string(src), "const "+name+" = {")
		end := strings.Index(string(src)[start:], "\n};")
		keys := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)(?:^\s*|[{,]\s*)(?:'([a-zA-Z._]+)'|([a-zA-Z_]+))\s*:\s*'`).FindAllStringSubmatch(string(src)[start:start+end], -1) {
			keys[m[1]+m[2]] = true
		}
		return keys
	}
	en, zh := dict("en"), dict("zh")
	if len(en) < 100 {
		t.Fatalf("read only %d English keys", len(en))
	}
	var onlyEN, onlyZH []string
	for k := range en {
		if !zh[k] {
			onlyEN = append(onlyEN, k)
		}
	}
	for k := range zh {
		if !en[k] {
			onlyZH = append(onlyZH, k)
		}
	}
	sort.Strings(onlyEN)
	sort.Strings(onlyZH)
	if len(onlyEN)+len(onlyZH) > 0 {
		t.Errorf("keys only in English: %v; only in Chinese: %v", onlyEN, onlyZH)
	}
	used := map[string]bool{}
	for name, f := range uiFiles {
		if !strings.HasSuffix(name, ".js") && !strings.HasSuffix(name, ".html") {
			continue
		}
		for _, m := range regexp.MustCompile(`\bt\('([a-zA-Z._]+)'[,)]|data-i18n(?:-aria)?="([a-zA-Z._]+)"`).FindAllStringSubmatch(string(f.body), -1) {
			used[m[1]+m[2]] = true
		}
	}
	// Keys built from data: every value the API can send.
	for _, p := range []struct {
		prefix string
		values []string
	}{
		{"outcome.", []string{"accepted", "resolved", "improved", "downgraded", "failed"}},
		{"sev.", []string{"Info", "WeakEvidence", "Warning", "Contradiction", "Fatal"}},
		{"origin.", []string{"builtin", "overridden", "added", "disabled"}},
		{"col.", []string{"time", "route", "variant", "client", "status", "issues", "outcome", "revisions", "tokens", "latency"}},
		{"rate.", []string{"first_draft_contradiction", "revision", "residual_contradiction", "resolved", "downgrade",
			"first_draft_contradiction.of", "revision.of", "residual_contradiction.of", "resolved.of", "downgrade.of"}},
		{"trace.", []string{"revision", "repair"}},
	} {
		for _, v := range p.values {
			used[p.prefix+v] = true
		}
	}
	var missing []string
	for k := range used {
		if !en[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("texts used but not defined: %v", missing)
	}
}

// TestUIModulesResolve: every module a page imports is embedded (a typo would
// only show as a blank page).
func TestUIModulesResolve(t *testing.T) {
	t.Parallel()
	for name, f := range uiFiles {
		for _, m := range regexp.MustCompile(`(?:from\s+|src=|href=)["']([./][^"']*)["']`).FindAllStringSubmatch(string(f.body), -1) {
			ref := m[1]
			if strings.HasPrefix(ref, "#") || strings.HasPrefix(ref, "http") {
				continue
			}
			ref = strings.TrimPrefix(strings.TrimPrefix(ref, UIPath), "./")
			if _, ok := uiFiles[ref]; !ok {
				t.Errorf("%s refers to %s, which is not embedded", name, m[1])
			}
		}
	}
}

func TestSummaryJSONLeavesTheSeverityRankOut(t *testing.T) {
	t.Parallel()
	b, _ := json.Marshal(Summary{DraftWorst: "Contradiction", draftWorst: 3})
	if strings.Contains(string(b), "draftWorst") || !strings.Contains(string(b), `"draft_worst":"Contradiction"`) {
		t.Fatal(string(b))
	}
}

// BenchmarkCaptureRequest: what keeping the client's request costs each
// intercepted request: the 23 KB operation log cut at the default 8 KiB.
func BenchmarkCaptureRequest(b *testing.B) {
	replay, err := os.ReadFile("testdata/allied_vs_soviet.txt")
	if err != nil {
		b.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"model": "ra3-analyst", "messages": []map[string]string{
		{"role": "system", "content": "你是红警 3 录像分析助手。"},
		{"role": "user", "content": "分析这局录像。\n\n" + string(replay)},
	}})
	ex := &interceptors.Exchange{Original: body, Model: "ra3-analyst"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		CaptureRequest(ex, DefaultRequestBytes)
	}
}

// BenchmarkRecord: adding a finished request to the list, with a live feed
// subscribed.
func BenchmarkRecord(b *testing.B) {
	r := newRecentRequests(DefaultRecentRequests)
	sub, _ := r.subscribe(0)
	go func() {
		for range sub.ch {
		}
	}()
	s := Summary{TraceID: "0123456789abcdef0123456789abcdef", Route: "ra3-analyst", Client: "app", Status: 200}
	b.ReportAllocs()
	for b.Loop() {
		r.add(s)
	}
	r.unsubscribe(sub)
}
