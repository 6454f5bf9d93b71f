package console

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// DiffOp is one piece of a diff: text both sides share ("eq"), text only the old
// side has ("del"), or text only the new side has ("ins"). The eq and del pieces
// join to the old text, the eq and ins pieces to the new.
type DiffOp struct {
	Op   string `json:"op"`
	Text string `json:"text"`
}

// diffCells bounds the table of one longest-common-subsequence diff (lines of the
// whole texts, or words of one changed passage); beyond it the passage is shown
// as replaced whole rather than spend unbounded time and memory.
const diffCells = 4 << 20

// Diff returns the changes that turn old into new: by lines, and inside each
// changed passage by words (a CJK character counts as a word), so that a corrected
// time or unit in a long line stands out.
func Diff(old, new string) []DiffOp {
	lines := diffSeq(splitLines(old), splitLines(new))
	var out []DiffOp
	for i := 0; i < len(lines); i++ {
		op := lines[i]
		if op.Op == "del" && i+1 < len(lines) && lines[i+1].Op == "ins" {
			for _, w := range absorbShortEquals(diffSeq(splitWords(op.Text), splitWords(lines[i+1].Text))) {
				out = appendOp(out, w)
			}
			i++
			continue
		}
		out = appendOp(out, op)
	}
	if out == nil {
		out = []DiffOp{}
	}
	return out
}

// absorbShortEquals folds an equal piece of one or two characters that sits
// between two changes into both of them: "6:02 出动" → "5:30 生产" reads as one
// replacement, not as four around a shared ":" and " ".
func absorbShortEquals(ops []DiffOp) []DiffOp {
	var out []DiffOp
	var del, ins strings.Builder
	changed := false
	flush := func() {
		out = appendOp(out, DiffOp{"del", del.String()})
		out = appendOp(out, DiffOp{"ins", ins.String()})
		del.Reset()
		ins.Reset()
		changed = false
	}
	for i, op := range ops {
		switch {
		case op.Op == "del":
			del.WriteString(op.Text)
			changed = true
		case op.Op == "ins":
			ins.WriteString(op.Text)
			changed = true
		case changed && utf8.RuneCountInString(op.Text) <= 2 && i+1 < len(ops) && ops[i+1].Op != "eq":
			del.WriteString(op.Text)
			ins.WriteString(op.Text)
		default:
			flush()
			out = appendOp(out, op)
		}
	}
	flush()
	return out
}

func appendOp(ops []DiffOp, op DiffOp) []DiffOp {
	if op.Text == "" {
		return ops
	}
	if n := len(ops); n > 0 && ops[n-1].Op == op.Op {
		ops[n-1].Text += op.Text
		return ops
	}
	return append(ops, op)
}

// diffSeq diffs two token sequences by their longest common subsequence, after
// taking off the common prefix and suffix. Adjacent pieces of one kind are joined.
func diffSeq(a, b []string) []DiffOp {
	var out []DiffOp
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		out = appendOp(out, DiffOp{"eq", a[p]})
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	suffix := a[len(a)-s:]
	a, b = a[p:len(a)-s], b[p:len(b)-s]
	n, m := len(a), len(b)
	if n > 0 && m > 0 && n*m <= diffCells {
		// lcs[i*(m+1)+j] is the length of the common subsequence of a[i:] and b[j:].
		w := m + 1
		lcs := make([]int32, (n+1)*w)
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if a[i] == b[j] {
					lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
				} else {
					lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n && j < m {
			switch {
			case a[i] == b[j]:
				out = appendOp(out, DiffOp{"eq", a[i]})
				i, j = i+1, j+1
			case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
				out = appendOp(out, DiffOp{"del", a[i]})
				i++
			default:
				out = appendOp(out, DiffOp{"ins", b[j]})
				j++
			}
		}
		a, b = a[i:], b[j:]
	}
	out = appendOp(out, DiffOp{"del", strings.Join(a, "")})
	out = appendOp(out, DiffOp{"ins", strings.Join(b, "")})
	for _, t := range suffix {
		out = appendOp(out, DiffOp{"eq", t})
	}
	return out
}

// splitLines splits after each newline; the pieces join to s.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.SplitAfter(s, "\n")
}

// splitWords splits s into runs of letters and digits (ASCII and other
// alphabets), single CJK characters, runs of white space, and single other
// characters; the pieces join to s.
func splitWords(s string) []string {
	var out []string
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		n := size
		switch {
		case unicode.IsSpace(r):
			for n < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[n:])
				if !unicode.IsSpace(r2) {
					break
				}
				n += sz
			}
		case isWordRune(r) && !isCJK(r):
			for n < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[n:])
				if !isWordRune(r2) || isCJK(r2) {
					break
				}
				n += sz
			}
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}
