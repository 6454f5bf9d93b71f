package facts

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// The rules of a pack usually open the same way — a time, spaces, a player,
// spaces — and differ from the op's literal on (RA3: "开始建造建筑", "选择",
// "使用"). Trying each rule on a line would read that opening once per rule, and
// the prefilter before each (a substring search for the rule's longest literal)
// would read the whole line per rule too. A lead is that shared opening, when it
// leaves no way back (literals, characters, possessive runs, options the next
// byte decides): its one path through a line is the same for every rule that
// starts with it, so the extraction runs it once per line and each of those rules
// goes on from where it ended, deciding at its own literal in a comparison or two.

// lineLead is the opening that the line programs of some of an extractor's rules
// share: the first n instructions of prog.
type lineLead struct {
	prog *lineProg
	n    int
	// slots is how many submatch slots the lead's saves reach (at most 2*ncap of
	// every program that shares it).
	slots int
}

// findLead returns the longest lead the programs share (nil when they share none
// worth running once: fewer than two programs, or no instruction in common).
func findLead(progs []*lineProg) *lineLead {
	if len(progs) < 2 {
		return nil
	}
	first := progs[0]
	common := len(first.insts)
	for _, p := range progs[1:] {
		k := 0
		for k < common && k < len(p.insts) && sameInst(&first.insts[k], &p.insts[k]) {
			k++
		}
		common = k
	}
	// The lead ends at the longest prefix every instruction of which has no way
	// back and jumps no further than the prefix's end.
	n := 0
	for c := 1; c <= common; c++ {
		if leadCut(first.insts[:c]) {
			n = c
		}
	}
	if n == 0 {
		return nil
	}
	slots := 0
	for _, in := range first.insts[:n] {
		if in.op == instSave {
			slots = max(slots, in.slot+1)
		}
	}
	return &lineLead{prog: first, n: n, slots: slots}
}

// leadCut reports whether insts can be run on their own as a lead: no
// instruction keeps a way back (instSplit, a run that may give bytes back), none
// ends the line, and every jump lands inside insts or just after them.
func leadCut(insts []inst) bool {
	end := len(insts)
	for _, in := range insts {
		switch in.op {
		case instLit, instChar, instSave:
		case instRun:
			if !in.possessive {
				return false
			}
		case instByte:
			if in.x > end || in.y > end {
				return false
			}
		case instJmp:
			if in.x > end {
				return false
			}
		default: // instSplit, instEnd
			return false
		}
	}
	return true
}

// sameInst reports whether two instructions do the same thing.
func sameInst(a, b *inst) bool {
	if a.op != b.op || a.lit != b.lit || a.min != b.min || a.possessive != b.possessive ||
		a.x != b.x || a.y != b.y || a.slot != b.slot || !slices.Equal(a.ranges, b.ranges) {
		return false
	}
	switch {
	case a.set == nil || b.set == nil:
		return a.set == b.set
	default:
		return *a.set == *b.set
	}
}

// shares reports whether p opens with the lead.
func (l *lineLead) shares(p *lineProg) bool {
	if p == nil || len(p.insts) < l.n {
		return false
	}
	for k := range l.n {
		if !sameInst(&l.prog.insts[k], &p.insts[k]) {
			return false
		}
	}
	return true
}

// leadRun is the lead's run on one line.
type leadRun struct {
	done bool
	// ok: the lead matched the line's start, ending at i after steps steps, with
	// sub[:slots] as it saved them (-1 where it saved nothing).
	ok      bool
	aborted bool // the run took more steps than a program may: ask the regexp
	i       int
	steps   int
	sub     []int
}

// run runs the lead on line within the step bound of a program's run.
func (l *lineLead) run(line string, r *leadRun) {
	sub := r.sub[:l.slots]
	for k := range sub {
		sub[k] = -1
	}
	*r = leadRun{done: true, sub: r.sub}
	budget := progStepsBase + progStepsPerByte*len(line)
	s, i, pc, steps := line, 0, 0, 0
	for pc < l.n {
		if steps++; steps > budget {
			r.aborted = true
			return
		}
		in := &l.prog.insts[pc]
		switch in.op {
		case instLit:
			if len(s)-i < len(in.lit) || s[i:i+len(in.lit)] != in.lit {
				return
			}
			i += len(in.lit)
			pc++
		case instChar:
			if i >= len(s) || !in.set.has(s[i]) {
				return
			}
			if s[i] < utf8.RuneSelf {
				i++
			} else {
				r, w := utf8.DecodeRuneInString(s[i:])
				if in.ranges != nil && !inRanges(in.ranges, r) {
					return
				}
				i += w
			}
			pc++
		case instRun: // possessive
			j := i
			for j < len(s) && in.set.has(s[j]) {
				j++
			}
			if j-i < in.min {
				return
			}
			i = j
			pc++
		case instByte:
			if i < len(s) && in.set.has(s[i]) {
				pc = in.x
			} else {
				pc = in.y
			}
		case instJmp:
			pc = in.x
		case instSave:
			sub[in.slot] = i
			pc++
		}
	}
	r.ok, r.i, r.steps = true, i, steps
}

// matchAfter is match for a program that shares lead, on a line the lead
// matched (r): sub (len 2*ncap) starts as the lead left it, and the program goes
// on from the lead's end with the steps the lead left.
func (p *lineProg) matchAfter(lead *lineLead, r *leadRun, line string, sub []int) (matched, decided bool) {
	copy(sub, r.sub[:lead.slots])
	for k := lead.slots; k < len(sub); k++ {
		sub[k] = -1
	}
	m := progRun{p: p, s: line, sub: sub, budget: progStepsBase + progStepsPerByte*len(line) - r.steps}
	if !m.run(lead.n, r.i) {
		return false, !m.aborted
	}
	sub[0], sub[1] = 0, len(line)
	return true, true
}

// findAfter is find for a rule whose program shares lead: the lead's run r on
// this line (made on first use) decides the opening once for all of them.
func (m *lineMatcher) findAfter(lead *lineLead, r *leadRun, line string, buf []int) []int {
	if !r.done {
		lead.run(line, r)
	}
	if !r.aborted {
		if !r.ok {
			return nil
		}
		// Most rules part from the others at a literal right after the lead: a
		// line of another op is refused there, before the run is set up.
		if in := &m.prog.insts[lead.n]; in.op == instLit && !strings.HasPrefix(line[r.i:], in.lit) {
			return nil
		}
		sub := buf[:2*m.prog.ncap]
		matched, decided := m.prog.matchAfter(lead, r, line, sub)
		return m.verdict(line, sub, matched, decided)
	}
	return m.verdict(line, nil, false, false)
}
