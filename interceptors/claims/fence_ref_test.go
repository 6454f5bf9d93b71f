package claims

import (
	"strings"
	"testing"
)

// refFenceScanner is fenceScanner as it was before it skipped a fence's body to
// the lines holding the fence character: every line examined in turn. The fuzz
// test below compares the two.
type refFenceScanner struct {
	s   string
	pos int
}

func (fs *refFenceScanner) next() (fence, bool) {
	s := fs.s
	for fs.pos < len(s) {
		lineStart := fs.pos
		line, next := lineAt(s, lineStart)
		fs.pos = next
		ch, n, info, ok := openingFence(line)
		if !ok {
			continue
		}
		f := fence{json: isJSONInfo(info)}
		f.whole.Start = lineStart
		f.body.Start = next
		for fs.pos < len(s) {
			closeStart := fs.pos
			cl, after := lineAt(s, closeStart)
			fs.pos = after
			if closingFence(cl, ch, n) {
				f.body.End = closeStart
				f.whole.End = closeStart + len(cl)
				return f, true
			}
		}
		f.body.End, f.whole.End = len(s), len(s)
		if f.body.Start > len(s) {
			f.body.Start = len(s)
		}
		return f, true
	}
	return fence{}, false
}

// checkFencesAsLineScan compares every fence the scanners find in s.
func checkFencesAsLineScan(t *testing.T, s string) {
	t.Helper()
	fs, ref := fenceScanner{s: s}, refFenceScanner{s: s}
	for k := 0; ; k++ {
		got, ok := fs.next()
		want, wantOK := ref.next()
		if got != want || ok != wantOK {
			t.Fatalf("fence %d of %q: got %+v %v, the line scan %+v %v", k, s, got, ok, want, wantOK)
		}
		if !ok {
			return
		}
	}
}

func TestFencesAsLineScan(t *testing.T) {
	t.Parallel()
	for _, s := range fenceSeeds(t) {
		checkFencesAsLineScan(t, s)
	}
}

func fenceSeeds(tb testing.TB) []string {
	return append(fuzzSeeds(tb), answer18(),
		"```json\n{}\n ``\n```x\n   ````\n```", "~~~\na~\n ~~~~ \r\n~~~", "```\n````\n```",
		"```json\n``", "```json\n```", "```json\n", "```json", "x\n```\nab`\n  `\n    ```\n```\n",
		"~~~\n```\n~~~\n```\n`", "\n\n```\n\n\n", "````\n```\n`````\n")
}

func FuzzFencesAsLineScan(f *testing.F) {
	for _, s := range fenceSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkFencesAsLineScan(t, s)
		// The body's lines, with their line breaks, as the fuzzer varies them.
		checkFencesAsLineScan(t, "```json\n"+strings.ReplaceAll(s, "|", "\n")+"\n")
	})
}
