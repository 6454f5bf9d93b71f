package claims

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// Span is a byte range [Start, End) of an answer's content.
type Span struct {
	Start, End int
}

// Len returns the span's length in bytes.
func (s Span) Len() int { return s.End - s.Start }

// in reports whether s lies within a text of n bytes.
func (s Span) in(n int) bool { return 0 <= s.Start && s.Start <= s.End && s.End <= n }

// Location says where the claims block is in an answer's content. The zero value
// means no block and no marker.
type Location struct {
	// Found reports that a block was located (it may still fail to parse).
	Found bool
	// Span is the block's JSON text: the body of the fenced block (the lines between
	// the fences) or the balanced {...} group the fallback found.
	Span Span
	// Fenced reports that the block is a fenced code block.
	Fenced bool
	// Fence is the whole block as it appears in the content: from the start of the
	// opening fence line to the end of the closing fence line (before its line
	// break), or to the end of the text for a fence never closed. Equal to Span when
	// the block is not fenced.
	Fence Span
	// Marker reports that the pack's marker occurs outside the block.
	Marker bool
	// MarkerSpan is the last occurrence of the marker outside the block (zero when
	// Marker is false).
	MarkerSpan Span

	// norm caches the normalised block the fallback already computed.
	norm    string
	hasNorm bool
}

// Locate finds the claims block in content (see the package documentation for
// the exact rule). It does not report issues; Parse does.
func (p *Parser) Locate(content string) Location {
	var loc Location
	last := -1
	if p.marker != "" {
		last = lastIndex(content, p.marker)
	}
	if last >= 0 {
		if f, ok := lastJSONFence(content, last+len(p.marker)); ok {
			loc = Location{Found: true, Span: f.body, Fenced: true, Fence: f.whole}
		}
	}
	if !loc.Found {
		loc = p.fallback(content)
	}
	if m, ok := p.markerOutside(content, last, loc); ok {
		loc.Marker, loc.MarkerSpan = true, m
	}
	return loc
}

// markerOutside returns the last occurrence of the marker outside loc's block,
// given the last occurrence in content (-1 for none). The occurrences after the
// block, if any, end with that last one, and the others lie before the block, so
// only when the last one overlaps the block is the part of content before the
// block searched again. A marker that found its fence lies before it: the common
// case takes no second search.
func (p *Parser) markerOutside(content string, last int, loc Location) (Span, bool) {
	if last < 0 {
		return Span{}, false
	}
	m := Span{last, last + len(p.marker)}
	if !loc.Found || m.End <= loc.Fence.Start || m.Start >= loc.Fence.End {
		return m, true
	}
	if before := lastIndex(content[:loc.Fence.Start], p.marker); before >= 0 {
		return Span{before, before + len(p.marker)}, true
	}
	return Span{}, false
}

// lastIndex is strings.LastIndex searching forwards, which is much faster for
// multi-byte markers that occur a few times in a long text.
func lastIndex(s, sub string) int {
	last := -1
	for from := 0; ; {
		i := strings.Index(s[from:], sub)
		if i < 0 {
			return last
		}
		last = from + i
		from = last + 1
	}
}

// fence is one fenced code block.
type fence struct {
	whole Span // opening line start to closing line end
	body  Span // the lines between the fences
	json  bool // info string empty or "json"
}

// fenceScanner walks the fenced code blocks of a text in order, pairing fences
// from the start as CommonMark does.
type fenceScanner struct {
	s   string
	pos int // start of the next line to examine
}

func (fs *fenceScanner) next() (fence, bool) {
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
			closeStart := fs.nextLineWith(ch)
			if closeStart < 0 {
				break
			}
			cl, after := lineAt(s, closeStart)
			fs.pos = after
			if closingFence(cl, ch, n) {
				f.body.End = closeStart
				f.whole.End = closeStart + len(cl)
				return f, true
			}
		}
		fs.pos = len(s)
		f.body.End, f.whole.End = len(s), len(s)
		if f.body.Start > len(s) {
			f.body.Start = len(s)
		}
		return f, true
	}
	return fence{}, false
}

// nextLineWith returns the start of the first line from fs.pos on that holds c,
// or -1. Only such a line can close a fence of c, so the lines of a fence's body
// are skipped in one memory scan, not examined one by one.
func (fs *fenceScanner) nextLineWith(c byte) int {
	k := strings.IndexByte(fs.s[fs.pos:], c)
	if k < 0 {
		return -1
	}
	return fs.pos + strings.LastIndexByte(fs.s[fs.pos:fs.pos+k], '\n') + 1
}

// lineAt returns the line starting at i without its "\n" (a trailing "\r" stays) and
// the start of the next line (len(s)+1 past the last line, so callers stop).
func lineAt(s string, i int) (string, int) {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return s[i : i+j], i + j + 1
	}
	return s[i:], len(s) + 1
}

// openingFence reads a CommonMark opening code fence line.
func openingFence(line string) (ch byte, n int, info string, ok bool) {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i > 3 || i >= len(line) || (line[i] != '`' && line[i] != '~') {
		return 0, 0, "", false
	}
	ch = line[i]
	j := i
	for j < len(line) && line[j] == ch {
		j++
	}
	if j-i < 3 {
		return 0, 0, "", false
	}
	info = strings.TrimSpace(line[j:])
	if ch == '`' && strings.IndexByte(info, '`') >= 0 {
		return 0, 0, "", false
	}
	return ch, j - i, info, true
}

// closingFence reports whether line closes a fence of n or more ch characters.
func closingFence(line string, ch byte, n int) bool {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i > 3 {
		return false
	}
	j := i
	for j < len(line) && line[j] == ch {
		j++
	}
	if j-i < n {
		return false
	}
	for ; j < len(line); j++ {
		if c := line[j]; c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// isJSONInfo reports an empty info string or one whose first word is "json" in any
// case.
func isJSONInfo(info string) bool {
	if info == "" {
		return true
	}
	word := info
	if i := strings.IndexAny(info, " \t{"); i >= 0 {
		word = info[:i]
	}
	return strings.EqualFold(word, "json")
}

// lastJSONFence returns the last JSON fence with a non-blank body that opens at or
// after from.
func lastJSONFence(s string, from int) (fence, bool) {
	fs := fenceScanner{s: s}
	var last fence
	found := false
	for {
		f, ok := fs.next()
		if !ok {
			return last, found
		}
		if f.json && f.whole.Start >= from && !isBlank(s[f.body.Start:f.body.End]) {
			last, found = f, true
		}
	}
}

// fallbackSlack and four times the content's length bound the bytes the fallback
// normalises and parses while trying candidate groups, so that nested candidates
// cannot make it quadratic.
const fallbackSlack = 64 << 10

// fallback finds the block among the balanced {...} groups of s, trying them
// from the last closing brace to the first.
func (p *Parser) fallback(s string) Location {
	groups := balancedGroups(s)
	broken := -1
	budget := 4*len(s) + fallbackSlack
	for i := len(groups) - 1; i >= 0 && budget > 0; i-- {
		g := s[groups[i].Start:groups[i].End]
		if !p.mentionsClaims(g) || len(g) > MaxBlockBytes {
			continue
		}
		budget -= len(g)
		norm, err := NormalizeString(g)
		if err == nil && rawjson.ValidString(norm, MaxDepth) {
			if p.holdsClaimArray(gjson.Parse(norm)) {
				loc := Location{Found: true, Span: groups[i], Fence: groups[i], norm: norm, hasNorm: true}
				adoptFence(s, &loc)
				return loc
			}
			continue
		}
		if broken < 0 {
			broken = i
		}
	}
	if broken < 0 {
		return Location{}
	}
	loc := Location{Found: true, Span: groups[broken], Fence: groups[broken]}
	adoptFence(s, &loc)
	return loc
}

// mentionsClaims reports whether text names one of the declared claim arrays.
func (p *Parser) mentionsClaims(text string) bool {
	if p.typed || len(p.kinds) == 0 {
		return strings.Contains(text, UnitClaimsField) ||
			strings.Contains(text, EventClaimsField) ||
			strings.Contains(text, TimelineClaimsField)
	}
	for _, k := range p.kinds {
		if strings.Contains(text, k.name) {
			return true
		}
	}
	return false
}

// holdsClaimArray reports an object with at least one declared claims field that
// is an array.
func (p *Parser) holdsClaimArray(root gjson.Result) bool {
	if !root.IsObject() {
		return false
	}
	if p.typed || len(p.kinds) == 0 {
		for _, f := range claimFields {
			if root.Get(f).IsArray() {
				return true
			}
		}
		return false
	}
	for _, k := range p.kinds {
		if root.Get(k.name).IsArray() {
			return true
		}
	}
	return false
}

// adoptFence widens a fallback location to the fenced block whose whole body (but
// whitespace) is the group, so that Strip removes the fences too.
func adoptFence(s string, loc *Location) {
	fs := fenceScanner{s: s}
	for {
		f, ok := fs.next()
		if !ok || f.whole.Start > loc.Span.Start {
			return
		}
		if f.body.Start <= loc.Span.Start && loc.Span.End <= f.body.End {
			if isBlank(s[f.body.Start:loc.Span.Start]) && isBlank(s[loc.Span.End:f.body.End]) {
				loc.Fenced, loc.Fence = true, f.whole
			}
			return
		}
	}
}

func isBlank(s string) bool {
	return strings.TrimLeft(s, " \t\r\n") == ""
}

// maxGroups bounds how many balanced groups the fallback keeps; past it the
// earliest are forgotten, since the block is looked for from the end.
const maxGroups = 4096

// balancedGroups returns the balanced {...} groups of s at any depth up to MaxDepth,
// in the order of their closing braces, in one linear pass (see the package
// documentation for the rule).
func balancedGroups(s string) []Span {
	var groups []Span
	// The innermost MaxDepth open braces, as a ring: when it is full, the outermost
	// one is forgotten (dropped counts them, so their closing braces match nothing).
	var ring [MaxDepth]int
	top, depth, dropped := 0, 0, 0
	noCommentEnd := false // no "*/" follows the current position
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			if depth == len(ring) {
				dropped++
				depth--
			}
			ring[top] = i
			top = (top + 1) % len(ring)
			depth++
		case '}':
			if depth == 0 {
				if dropped > 0 {
					dropped-- // closes a forgotten brace
				}
				continue // else a stray closing brace in prose
			}
			top = (top + len(ring) - 1) % len(ring)
			depth--
			if len(groups) == 2*maxGroups {
				groups = append(groups[:0], groups[maxGroups:]...)
			}
			groups = append(groups, Span{ring[top], i + 1})
		case '"':
			if depth+dropped == 0 {
				continue // quotes in prose mean nothing
			}
			// Skip the string; it also ends at a line break, which JSON strings
			// cannot hold, so a stray quote hides at most the rest of its line.
			for i++; i < len(s) && s[i] != '"' && s[i] != '\n'; i++ {
				if s[i] == '\\' && i+1 < len(s) && s[i+1] != '\n' {
					i++
				}
			}
		case '/':
			if depth+dropped == 0 || i+1 >= len(s) {
				continue
			}
			switch s[i+1] {
			case '/':
				if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
					i += j
				} else {
					i = len(s)
				}
			case '*':
				if noCommentEnd {
					continue
				}
				if j := strings.Index(s[i+2:], "*/"); j >= 0 {
					i += 2 + j + 1
				} else {
					noCommentEnd = true // an unclosed /* is not a comment
				}
			}
		}
	}
	return groups
}
