package knowledge

import "strings"

// TextHeads are the user texts of a request as the context and apply rules read
// them: the head of each text, which the caller may produce on demand. The rules
// stop as soon as they have decided — the header block of an operation log is in
// its first lines — so a caller that decodes the texts from JSON need decode only
// what the rules ask for, not Context.MaxLines lines of each.
type TextHeads interface {
	// Count returns the number of texts.
	Count() int
	// Head returns the head of text i with at least lines line breaks (or all of
	// it when it has fewer), and more = true when the text goes on past what is
	// returned. Each call for text i returns an extension of what earlier calls
	// returned (their result is a prefix of it), so that lines already read stay
	// valid. A head may be longer than the rules' bounds: they cut it.
	Head(i, lines int) (head string, more bool)
}

// Texts are complete texts as TextHeads.
type Texts []string

// Count implements TextHeads.
func (t Texts) Count() int { return len(t) }

// Head implements TextHeads: the whole text.
func (t Texts) Head(i, _ int) (string, bool) { return t[i], false }

// firstHeadLines is how many lines of a text a scan asks for first; it doubles
// the request each time it needs more. An operation log's header block, and its
// first operation, are within its first eight lines.
const firstHeadLines = 8

// lineScan reads the lines of the texts' heads the rules look at, in order: the
// first maxLines lines within the first maxBytes bytes of each text, after a
// byte-order mark, each without its line break (\n or \r\n). It asks the heads
// for more lines only when it has read those it has.
type lineScan struct {
	heads              TextHeads // nil: texts, whole
	texts              []string
	maxLines, maxBytes int

	text  int    // the text being read; heads.Count() when done
	head  string // its head so far, the mark trimmed and cut at maxBytes
	more  bool   // the text goes on past head (within the bounds)
	asked int    // the lines last asked for
	off   int    // where the next line starts in head
	lines int    // the lines of the text read so far
}

// newLineScan starts a scan of heads (nil: texts) within p's context bounds.
// Whole texts are read without the interface, which would cost an allocation.
func newLineScan(p *Pack, texts []string, heads TextHeads) lineScan {
	maxLines, maxBytes := p.Context.MaxLines, p.Context.MaxBytes
	if maxLines <= 0 {
		maxLines = DefaultContextMaxLines
	}
	if maxBytes <= 0 {
		maxBytes = DefaultContextMaxBytes
	}
	s := lineScan{heads: heads, texts: texts, maxLines: maxLines, maxBytes: maxBytes, text: -1}
	s.nextText()
	return s
}

// count returns the number of texts.
func (s *lineScan) count() int {
	if s.heads == nil {
		return len(s.texts)
	}
	return s.heads.Count()
}

// nextText moves to the start of the next text.
func (s *lineScan) nextText() {
	s.text++
	s.head, s.more, s.off, s.lines = "", false, 0, 0
	if s.text < s.count() {
		s.asked = firstHeadLines
		s.load()
	}
}

// load reads the current text's head as far as asked, as the rules see it: the
// mark trimmed, cut at maxBytes. A head cut at maxBytes is all the rules read of
// the text, whatever follows.
func (s *lineScan) load() {
	var head string
	var more bool
	if s.heads == nil {
		head = s.texts[s.text]
	} else {
		head, more = s.heads.Head(s.text, s.asked)
	}
	if s.asked >= s.maxLines {
		// The head holds maxLines line breaks or all of the text: nothing past it
		// is read (and a head that breaks its word cannot loop the scan).
		more = false
	}
	head = strings.TrimPrefix(head, "\uFEFF")
	if len(head) >= s.maxBytes {
		head, more = head[:s.maxBytes], false
	}
	s.head, s.more = head, more
}

// next returns the next line; ok is false when the scan is done.
func (s *lineScan) next() (line string, ok bool) {
	for s.text < s.count() {
		if s.lines < s.maxLines {
			rest := s.head[s.off:]
			i := strings.IndexByte(rest, '\n')
			if i < 0 && s.more {
				// The line may go on in what the head has not returned yet.
				s.asked = min(2*s.asked, s.maxLines)
				if s.asked <= s.lines {
					s.asked = s.lines + 1
				}
				s.load()
				continue
			}
			if rest != "" {
				if i >= 0 {
					line, s.off = rest[:i], s.off+i+1
				} else {
					line, s.off = rest, len(s.head)
				}
				s.lines++
				return strings.TrimSuffix(line, "\r"), true
			}
		}
		s.nextText()
	}
	return "", false
}
