package facts

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/factgate/factgate/interceptors"
)

// Extract reads one text (a user message) into a fact index. See ExtractTexts.
func (x *Extractor) Extract(text string) (*Index, error) {
	return x.ExtractTexts(text)
}

// ExtractTexts reads several texts — the user messages of one request, in order —
// into one fact index, as if they were one text with a line break between them:
// line numbers (Op.Line, 1-based) continue from one text to the next.
//
// Each line is read with CRLF/LF endings and surrounding ASCII white space removed;
// the op rules are tried in order and the first whose regex matches makes it an
// operation. A line matching no rule is ignored (prose around the log is fine); a
// line matching a rule whose captured values do not parse (a time that is not a
// game clock, a UnitId that is not an integer, a position that is not three
// numbers) is not an operation and is counted in Unparsed. Lines matching the
// Duration rule set the stated duration (the latest, when several do).
//
// Bounds, applied in line order so the result is a pure function of the texts:
// at most the rules' MaxLines lines (default 1,000,000) and at most the extractor's
// byte bound (WithMaxBytes; the trimmed lines' lengths plus one each) are read; the
// first line past either bound and everything after it are ignored and the index
// reports Truncated. Lines longer than MaxLineBytes are read but never operations.
//
// The index keeps the operation lines: when they all come from one text and make up
// most of it (a log), it refers to that text rather than copying it — texts are
// Go strings, immutable, so this is safe unless a caller made one with unsafe from
// memory it reuses (none does); otherwise it keeps one copy of the operation
// lines, in one allocation, never the texts. The error is non-nil only when x was
// not made by NewExtractor.
func (x *Extractor) ExtractTexts(texts ...string) (*Index, error) {
	if x == nil || x.schema == nil {
		return nil, errors.New("facts: extractor not made by NewExtractor")
	}
	st := extraction{x: x, sub: make([]int, 2*x.maxCaps)}
	if x.lead != nil {
		st.lead.sub = make([]int, x.lead.slots)
	}
	st.presize(texts)
	st.run(texts)
	return st.finish(texts), nil
}

type extraction struct {
	x   *Extractor
	sub []int // scratch for line programs' submatches
	// lead is the extractor's lead's run on the current line.
	lead leadRun
	// raw holds the operations in line order; their text spans are offsets in
	// their own source text until finish. textOps[t] is the first of text t's.
	raw     []opRec
	textOps []int
	opBytes int // the operation lines' total length
	units   []int64
	pos     [][3]float64
	// names are the interned players, assets and powers (names[0] = ""), pieces
	// of the texts until finish; nameIDs finds them, nameCache spares most
	// lookups.
	names     []string
	nameIDs   map[string]int32
	nameCache [16]nameCacheEntry
	lineOff   int // the offset of the current line in its text
	expected  int // the lines the texts hold, within the bound
	lines     int
	bytes     int
	unparsed  int
	truncated bool
	stated    time.Duration
	hasStated bool
}

// presize reserves room for the operations and their lines, assuming the texts
// are mostly log (the common case), within the extractor's bounds and at most
// 64Ki operations ahead: prose-heavy texts grow the buffers only as needed.
func (st *extraction) presize(texts []string) {
	size, lines := 0, 0
	for _, t := range texts {
		size += len(t)
		lines += strings.Count(t, "\n") + 1
	}
	st.expected = min(lines, st.x.maxLines)
	lines = min(lines, st.x.maxLines, 1<<16)
	st.raw = make([]opRec, 0, lines)
	st.units = make([]int64, 0, lines/2)
	st.pos = make([][3]float64, 0, lines/4)
	st.textOps = make([]int, len(texts)+1)
	st.names = append(make([]string, 0, 64), "")
	st.nameIDs = make(map[string]int32, 64)
}

type nameCacheEntry struct {
	name string
	id   int32
}

// intern returns the id of name (0 for "").
func (st *extraction) intern(name string) int32 {
	if name == "" {
		return 0
	}
	c := &st.nameCache[(len(name)*7+int(name[0])+int(name[len(name)-1])*3)&15]
	if c.id != 0 && c.name == name {
		return c.id
	}
	id, ok := st.nameIDs[name]
	if !ok {
		id = int32(len(st.names))
		st.names = append(st.names, name)
		st.nameIDs[name] = id
	}
	c.name, c.id = name, id
	return id
}

func (st *extraction) run(texts []string) {
	x := st.x
	defer func() {
		for t := range st.textOps {
			if st.textOps[t] < 0 {
				st.textOps[t] = len(st.raw)
			}
		}
	}()
	for t := range st.textOps {
		st.textOps[t] = -1
	}
	for t, text := range texts {
		st.textOps[t] = len(st.raw)
		for off := 0; off < len(text); {
			end := len(text)
			next := end
			if i := strings.IndexByte(text[off:], '\n'); i >= 0 {
				end = off + i
				next = end + 1
			}
			for off < end && isSpace(text[off]) {
				off++
			}
			for end > off && isSpace(text[end-1]) {
				end--
			}
			line := text[off:end]
			st.lineOff, off = off, next
			if st.lines >= x.maxLines || st.bytes+len(line)+1 > x.maxBytes {
				st.truncated = true
				return
			}
			st.lines++
			st.bytes += len(line) + 1
			if len(line) == 0 || len(line) > MaxLineBytes {
				continue
			}
			st.line(line)
		}
	}
}

// line tries the op rules, then the duration rule, on one trimmed line.
func (st *extraction) line(line string) {
	x := st.x
	st.lead.done = false
	for k := range x.ops {
		m := &x.ops[k]
		sub := st.find(&m.lineMatcher, line)
		if sub == nil {
			continue
		}
		if !st.addOp(m, line, sub) {
			st.unparsed++
		}
		return
	}
	if d := x.duration; d != nil {
		sub := st.find(d, line)
		if sub == nil {
			return
		}
		at, ok := group(line, sub, d.gTime)
		if !ok {
			st.unparsed++
			return
		}
		t, ok := interceptors.ParseClock(at)
		if !ok {
			st.unparsed++
			return
		}
		if !st.hasStated || t > st.stated {
			st.stated, st.hasStated = t, true
		}
	}
}

// find matches one rule on line: through the lead's run when the rule shares it.
func (st *extraction) find(m *lineMatcher, line string) []int {
	if m.shared && m.prog != nil {
		return m.findAfter(st.x.lead, &st.lead, line, st.sub)
	}
	return m.find(line, st.sub)
}

// addOp parses a matched line's groups into an operation. It reports false (and
// adds nothing) when a value does not parse.
func (st *extraction) addOp(m *opMatcher, line string, sub []int) bool {
	at, _ := group(line, sub, m.gTime)
	t, ok := interceptors.ParseClock(at)
	if !ok {
		return false
	}
	unitsStart := len(st.units)
	if s, ok := group(line, sub, m.gUnit); ok {
		u, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return false
		}
		st.units = append(st.units, u)
	}
	if s, ok := group(line, sub, m.gUnits); ok {
		var ok bool
		if st.units, ok = m.splitUnits(st.units, s); !ok {
			st.units = st.units[:unitsStart]
			return false
		}
	}
	r := opRec{at: t, line: int32(st.lines), kind: int32(m.kindID)}
	if s, ok := group(line, sub, m.gPos); ok {
		p, ok := parsePos(s)
		if !ok {
			st.units = st.units[:unitsStart]
			return false
		}
		st.pos = append(st.pos, p)
		r.pos = int32(len(st.pos))
	}
	r.text = span{int32(st.lineOff), int32(st.lineOff + len(line))}
	if s, ok := group(line, sub, m.gPlayer); ok {
		r.player = st.intern(s)
	}
	if s, ok := group(line, sub, m.gAsset); ok {
		r.asset = st.intern(s)
	}
	if s, ok := group(line, sub, m.gPower); ok {
		r.power = st.intern(s)
	}
	r.unitsStart, r.unitsEnd = int32(unitsStart), int32(len(st.units))
	st.opBytes += len(line)
	st.raw = append(st.raw, r)
	if len(st.raw) == projectAfter {
		st.project()
	}
	return true
}

// projectAfter is the operation count after which the UnitIds' and positions'
// buffers are sized for the whole text.
const projectAfter = 512

// project sizes the UnitIds' and positions' buffers for the rest of the text from
// their rate so far, so that a log's buffers grow once, by about the right size,
// rather than doubling into twice the room they need.
func (st *extraction) project() {
	if st.lines <= 0 || st.expected <= st.lines {
		return
	}
	scale := func(n int) int {
		n = int(int64(n) * int64(st.expected) / int64(st.lines))
		return min(n+n/16+16, 1<<20)
	}
	if n := scale(len(st.units)); n > cap(st.units) {
		st.units = slices.Grow(st.units, n-len(st.units))
	}
	if n := scale(len(st.pos)); n > cap(st.pos) {
		st.pos = slices.Grow(st.pos, n-len(st.pos))
	}
}

// splitUnits appends the UnitIds of a "units" group (group 1 of each match of the
// units regex, leftmost first) to units. It reports false when one is not an
// integer.
func (m *opMatcher) splitUnits(units []int64, s string) ([]int64, bool) {
	if m.unitsPrefix == "" {
		for _, um := range m.unitsRe.FindAllStringSubmatchIndex(s, -1) {
			if um[2] < 0 {
				continue
			}
			u, err := strconv.ParseInt(s[um[2]:um[3]], 10, 64)
			if err != nil {
				return units, false
			}
			units = append(units, u)
		}
		return units, true
	}
	for {
		i := strings.Index(s, m.unitsPrefix)
		if i < 0 {
			return units, true
		}
		d := i + len(m.unitsPrefix)
		n := d
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n == d {
			s = s[i+1:] // no match here; like the regexp, try the next position
			continue
		}
		u, err := strconv.ParseInt(s[d:n], 10, 64)
		if err != nil {
			return units, false
		}
		units = append(units, u)
		s = s[n:]
	}
}

func (st *extraction) finish(texts []string) *Index {
	text, names := st.opText(texts)
	// The buffers were sized for a text that is all log; a text that is mostly
	// prose would keep the unused room alive in the memory tier.
	ix := &Index{
		recs:      clip(st.raw),
		text:      text,
		units:     clip(st.units),
		pos:       clip(st.pos),
		names:     names,
		schema:    st.x.schema,
		stated:    st.stated,
		hasStated: st.hasStated,
		lines:     st.lines,
		unparsed:  st.unparsed,
		truncated: st.truncated,
	}
	ix.sortOps()
	ix.derive()
	return ix
}

// opText returns the index's text and names and makes the operations' text spans
// spans of it: the one text the operations come from when they make up at least
// three quarters of it, else a copy of their lines and the names.
func (st *extraction) opText(texts []string) (string, []string) {
	from := -1
	for t := range texts {
		if st.textOps[t+1] > st.textOps[t] {
			if from >= 0 {
				from = -2
				break
			}
			from = t
		}
	}
	if from == -1 {
		return "", st.names[:1:1]
	}
	if from >= 0 && int64(st.opBytes)*4 >= int64(len(texts[from]))*3 && len(texts[from]) <= math.MaxInt32 {
		return texts[from], slices.Clip(st.names)
	}
	size := st.opBytes
	for _, n := range st.names {
		size += len(n)
	}
	var b strings.Builder
	b.Grow(size)
	for t := range texts {
		for i := st.textOps[t]; i < st.textOps[t+1]; i++ {
			r := &st.raw[i]
			start := int32(b.Len())
			b.WriteString(texts[t][r.text.start:r.text.end])
			r.text = span{start, start + r.text.end - r.text.start}
		}
	}
	nameSpans := make([]span, len(st.names))
	for i, n := range st.names {
		start := int32(b.Len())
		b.WriteString(n)
		nameSpans[i] = span{start, int32(b.Len())}
	}
	text := b.String()
	names := make([]string, len(st.names))
	for i, sp := range nameSpans {
		names[i] = text[sp.start:sp.end]
	}
	return text, names
}

// clip returns s without room to spare beyond a quarter: a copy when it has more.
func clip[T any](s []T) []T {
	if cap(s) <= len(s)+len(s)/4+8 {
		return s
	}
	return slices.Clone(s)
}

// sortOps orders the operations by time, keeping line order among equal times.
// Logs are written in time order, so the check usually spares the sort.
func (ix *Index) sortOps() {
	if slices.IsSortedFunc(ix.recs, cmpOpTime) {
		return
	}
	slices.SortStableFunc(ix.recs, cmpOpTime)
}

func cmpOpTime(a, b opRec) int {
	switch {
	case a.at < b.at:
		return -1
	case a.at > b.at:
		return 1
	}
	return 0
}

// group returns submatch g of line ("", false when the group is absent from the
// rule or did not participate in the match).
func group(line string, sub []int, g int) (string, bool) {
	if g < 0 || sub[2*g] < 0 {
		return "", false
	}
	return line[sub[2*g]:sub[2*g+1]], true
}

// parsePos reads "x,y,z" (white space around numbers allowed, parentheses around
// the whole allowed) as three finite numbers.
func parsePos(s string) ([3]float64, bool) {
	var p [3]float64
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '(' && s[len(s)-1] == ')' {
		s = s[1 : len(s)-1]
	}
	for i := range 3 {
		var part string
		if i < 2 {
			j := strings.IndexByte(s, ',')
			if j < 0 {
				return p, false
			}
			part, s = s[:j], s[j+1:]
		} else {
			if strings.IndexByte(s, ',') >= 0 {
				return p, false
			}
			part = s
		}
		v, ok := parseNumber(strings.TrimSpace(part))
		if !ok {
			return p, false
		}
		p[i] = v
	}
	return p, true
}

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseNumber reads a finite decimal number. Plain decimals of up to 15 digits
// ("-1204.5") take an exact fast path — an integer mantissa divided by an exact
// power of ten rounds once, as strconv does — and everything else goes to
// strconv.ParseFloat.
func parseNumber(s string) (float64, bool) {
	i, neg := 0, false
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		neg = s[i] == '-'
		i++
	}
	var mant uint64
	digits, frac := 0, -1
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			mant = mant*10 + uint64(c-'0')
			digits++
			if frac >= 0 {
				frac++
			}
		case c == '.' && frac < 0:
			frac = 0
		default:
			digits = 99 // not a plain decimal
		}
		if digits > 15 {
			break
		}
	}
	if digits == 0 || digits > 15 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, false
		}
		return v, true
	}
	v := float64(mant)
	if frac > 0 {
		v /= pow10[frac]
	}
	if neg {
		v = -v
	}
	return v, true
}

// trimSpace removes ASCII white space (including the CR of CRLF) around s.
func trimSpace(s string) string {
	start, end := 0, len(s)
	for start < end && isSpace(s[start]) {
		start++
	}
	for end > start && isSpace(s[end-1]) {
		end--
	}
	return s[start:end]
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}
