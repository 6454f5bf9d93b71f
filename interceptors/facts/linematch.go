package facts

import (
	"regexp/syntax"
	"unicode/utf8"
)

// A lineProg matches one rule's regular expression against a line without the
// regexp engine, for the shape fact rules take: anchored at both ends (^...$),
// literals, characters of a class, runs of a class (\S+, \s*), optional parts and
// repeated groups, greedy. It is a backtracking matcher, which finds exactly the
// match and submatches the regexp finds (Go's regexp chooses "the one that a
// backtracking implementation would have chosen"), reading literals and runs as
// bytes rather than runes. Where the next byte decides a choice (a run of \S
// followed by a space) it does not keep a way back, so a rule's line costs about
// one pass; a line that would take more than a few steps per byte is abandoned
// and given to the regexp, so no line costs more than the regexp would.
// compileLineProg returns nil for any other regular expression (case folding,
// alternation, lazy repetition, runs of classes that hold some non-ASCII runes but
// not all); such a rule runs on the regexp.
//
// Why bytes are enough: a run's class holds either every non-ASCII rune or none
// (\S, [^()], \d), so the run ends at the same ASCII byte (or the end) whether it
// is read by runes or by bytes, invalid UTF-8 included (the regexp reads an
// invalid byte as U+FFFD); a single character is read as a rune.
type lineProg struct {
	insts []inst
	// ncap is the number of submatch slots (groups + 1, for the whole match).
	ncap int
}

type instOp uint8

const (
	instLit   instOp = iota // the literal lit
	instChar                // one rune of class (ASCII bytes) or ranges (the others)
	instRun                 // min or more bytes of class, longest first
	instSplit               // try x, then y
	instByte                // x when the next byte is in set, else y (no way back)
	instJmp                 // x
	instSave                // sub[slot] = position
	instEnd                 // the end of the line
)

type inst struct {
	op     instOp
	lit    string
	set    *byteSet
	ranges []rune // instChar: the non-ASCII ranges of the class
	min    int
	// possessive: the run is followed by nothing that starts with a byte of its
	// class, so giving bytes back cannot help.
	possessive bool
	x, y       int
	slot       int
}

// node is the analysed form of a regexp the instructions are emitted from.
type node struct {
	re       *syntax.Regexp
	subs     []*node
	set      *byteSet // one-character nodes: the bytes a match starts with
	ranges   []rune
	first    byteSet // the bytes a non-empty match starts with (a superset)
	nullable bool
	follow   byteSet // the bytes what follows can start with (end of line: none)
}

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) has(c byte) bool { return s[c>>6]&(1<<(c&63)) != 0 }
func (s *byteSet) add(c byte)      { s[c>>6] |= 1 << (c & 63) }
func (s *byteSet) union(o *byteSet) {
	s[0], s[1], s[2], s[3] = s[0]|o[0], s[1]|o[1], s[2]|o[2], s[3]|o[3]
}
func (s *byteSet) meets(o *byteSet) bool { return s[0]&o[0]|s[1]&o[1]|s[2]&o[2]|s[3]&o[3] != 0 }

// compileLineProg returns the program of the regular expression src, or nil when
// src is not of the shape a program handles.
func compileLineProg(src string) *lineProg {
	re, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return nil
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 ||
		re.Sub[0].Op != syntax.OpBeginText || re.Sub[len(re.Sub)-1].Op != syntax.OpEndText {
		return nil
	}
	body, ok := analyse(&syntax.Regexp{Op: syntax.OpConcat, Sub: re.Sub[1 : len(re.Sub)-1]})
	if !ok {
		return nil
	}
	setFollow(body, byteSet{})
	p := &lineProg{ncap: re.MaxCap() + 1}
	p.emit(body)
	p.insts = append(p.insts, inst{op: instEnd})
	return p
}

// analyse builds the node tree of re with first sets and nullability; false when
// re has a part a program does not handle.
func analyse(re *syntax.Regexp) (*node, bool) {
	n := &node{re: re}
	switch re.Op {
	case syntax.OpEmptyMatch:
		n.nullable = true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 || len(re.Rune) == 0 {
			return nil, false
		}
		n.first.add(string(re.Rune)[0])
	case syntax.OpCharClass, syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		n.set, n.ranges = classBytes(re)
		n.first = *n.set
	case syntax.OpPlus, syntax.OpStar, syntax.OpQuest:
		if re.Flags&syntax.NonGreedy != 0 {
			return nil, false
		}
		sub, ok := analyse(re.Sub[0])
		if !ok || sub.nullable {
			return nil, false
		}
		if re.Op != syntax.OpQuest && sub.set != nil && sub.ranges != nil {
			return nil, false // a run of a class splitting the non-ASCII runes
		}
		n.subs, n.first, n.nullable = []*node{sub}, sub.first, re.Op != syntax.OpPlus
	case syntax.OpCapture:
		sub, ok := analyse(re.Sub[0])
		if !ok {
			return nil, false
		}
		n.subs, n.first, n.nullable = []*node{sub}, sub.first, sub.nullable
	case syntax.OpConcat:
		n.nullable = true
		for _, r := range re.Sub {
			sub, ok := analyse(r)
			if !ok {
				return nil, false
			}
			n.subs = append(n.subs, sub)
			if n.nullable {
				n.first.union(&sub.first)
			}
			n.nullable = n.nullable && sub.nullable
		}
	default:
		return nil, false
	}
	return n, true
}

// setFollow records, for n and its parts, the bytes what follows them can start
// with.
func setFollow(n *node, follow byteSet) {
	n.follow = follow
	switch n.re.Op {
	case syntax.OpPlus, syntax.OpStar:
		f := follow
		f.union(&n.subs[0].first) // another round
		setFollow(n.subs[0], f)
	case syntax.OpQuest, syntax.OpCapture:
		setFollow(n.subs[0], follow)
	case syntax.OpConcat:
		f := follow
		for i := len(n.subs) - 1; i >= 0; i-- {
			setFollow(n.subs[i], f)
			if !n.subs[i].nullable {
				f = n.subs[i].first
			} else {
				f.union(&n.subs[i].first)
			}
		}
	}
}

func (p *lineProg) add(in inst) int {
	p.insts = append(p.insts, in)
	return len(p.insts) - 1
}

// emit appends n's instructions.
func (p *lineProg) emit(n *node) {
	re := n.re
	switch re.Op {
	case syntax.OpEmptyMatch:
	case syntax.OpLiteral:
		p.add(inst{op: instLit, lit: string(re.Rune)})
	case syntax.OpCharClass, syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		p.add(inst{op: instChar, set: n.set, ranges: n.ranges})
	case syntax.OpCapture:
		p.add(inst{op: instSave, slot: 2 * re.Cap})
		p.emit(n.subs[0])
		p.add(inst{op: instSave, slot: 2*re.Cap + 1})
	case syntax.OpConcat:
		for _, sub := range n.subs {
			p.emit(sub)
		}
	case syntax.OpPlus, syntax.OpStar, syntax.OpQuest:
		sub := n.subs[0]
		if re.Op != syntax.OpQuest && sub.set != nil {
			min := 0
			if re.Op == syntax.OpPlus {
				min = 1
			}
			p.add(inst{op: instRun, set: sub.set, min: min, possessive: !sub.set.meets(&n.follow)})
			return
		}
		// The next byte decides whether to (re)enter sub when no match of sub
		// starts with a byte that can follow n.
		decided := !sub.first.meets(&n.follow)
		if re.Op == syntax.OpPlus {
			p.emit(sub)
		}
		choice := p.add(inst{op: instSplit})
		if decided {
			p.insts[choice].op, p.insts[choice].set = instByte, &sub.first
		}
		p.insts[choice].x = choice + 1
		p.emit(sub)
		if re.Op != syntax.OpQuest {
			p.add(inst{op: instJmp, x: choice})
		}
		p.insts[choice].y = len(p.insts)
	}
}

// classBytes returns the ASCII bytes of a one-character regexp, with every byte
// >= 0x80 when the class holds any non-ASCII rune (a superset, for first sets
// and runs), and the class's non-ASCII ranges when it holds some but not all of
// them (nil when all or none).
func classBytes(re *syntax.Regexp) (*byteSet, []rune) {
	var ranges []rune
	switch re.Op {
	case syntax.OpCharClass:
		ranges = re.Rune
	case syntax.OpAnyCharNotNL:
		ranges = []rune{0, '\n' - 1, '\n' + 1, utf8.MaxRune}
	default: // OpAnyChar
		ranges = []rune{0, utf8.MaxRune}
	}
	var s byteSet
	var high []rune
	count := rune(0)
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		for c := lo; c <= hi && c < utf8.RuneSelf; c++ {
			s.add(byte(c))
		}
		if hi >= utf8.RuneSelf {
			lo = max(lo, utf8.RuneSelf)
			high = append(high, lo, hi)
			count += hi - lo + 1
		}
	}
	if count > 0 {
		for c := 0x80; c <= 0xff; c++ {
			s.add(byte(c))
		}
	}
	if count == 0 || count == utf8.MaxRune-utf8.RuneSelf+1 {
		high = nil
	}
	return &s, high
}

// Bounds of one program run: a line that needs more steps goes to the regexp.
const (
	progStepsPerByte = 4
	progStepsBase    = 64
)

// match matches the whole line and fills sub (len 2*ncap) as
// regexp.FindStringSubmatchIndex would. It reports whether the line matches and
// whether the program decided it (false: the step bound was reached, ask the
// regexp). sub is garbage when the line does not match.
func (p *lineProg) match(line string, sub []int) (matched, decided bool) {
	for i := range sub {
		sub[i] = -1
	}
	m := progRun{p: p, s: line, sub: sub, budget: progStepsBase + progStepsPerByte*len(line)}
	if !m.run(0, 0) {
		return false, !m.aborted
	}
	sub[0], sub[1] = 0, len(line)
	return true, true
}

type progRun struct {
	p       *lineProg
	s       string
	sub     []int
	budget  int
	aborted bool
}

func (m *progRun) run(pc, i int) bool {
	s := m.s
	for {
		if m.budget--; m.budget < 0 {
			m.aborted = true
			return false
		}
		in := &m.p.insts[pc]
		switch in.op {
		case instLit:
			if len(s)-i < len(in.lit) || s[i:i+len(in.lit)] != in.lit {
				return false
			}
			i += len(in.lit)
			pc++
		case instChar:
			if i >= len(s) || !in.set.has(s[i]) {
				return false
			}
			if s[i] < utf8.RuneSelf {
				i++
			} else {
				r, w := utf8.DecodeRuneInString(s[i:])
				if in.ranges != nil && !inRanges(in.ranges, r) {
					return false
				}
				i += w
			}
			pc++
		case instRun:
			j := i
			for j < len(s) && in.set.has(s[j]) {
				j++
			}
			if j-i < in.min {
				return false
			}
			if in.possessive {
				i = j
				pc++
				continue
			}
			for ; j >= i+in.min; j-- {
				if m.run(pc+1, j) {
					return true
				}
				if m.aborted {
					return false
				}
			}
			return false
		case instSplit:
			if m.run(in.x, i) {
				return true
			}
			if m.aborted {
				return false
			}
			pc = in.y
		case instByte:
			if i < len(s) && in.set.has(s[i]) {
				pc = in.x
			} else {
				pc = in.y
			}
		case instJmp:
			pc = in.x
		case instSave:
			old := m.sub[in.slot]
			m.sub[in.slot] = i
			if m.run(pc+1, i) {
				return true
			}
			m.sub[in.slot] = old
			return false
		default: // instEnd
			return i == len(s)
		}
	}
}

func inRanges(ranges []rune, r rune) bool {
	for k := 0; k+1 < len(ranges); k += 2 {
		if ranges[k] <= r && r <= ranges[k+1] {
			return true
		}
	}
	return false
}
