package knowledge

import (
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// lineStart is the set of bytes a line can start with for a line-anchored regular
// expression (one beginning with ^) to match it: a line starting with another byte
// needs no regex run. The apply rules judge every request of a route, and a long
// message that is not a log must not cost a regex run per rule per line.
type lineStart struct {
	all bool // no prefilter: the regex can match anywhere, or start with anything
	b   [256]bool
}

// admits reports whether a line may match.
func (s *lineStart) admits(line string) bool {
	if s == nil || s.all {
		return true
	}
	return line != "" && s.b[line[0]]
}

// union adds o's bytes to s.
func (s *lineStart) union(o *lineStart) {
	if o == nil || o.all {
		s.all = true
		return
	}
	for i, ok := range o.b {
		if ok {
			s.b[i] = true
		}
	}
}

// lineStartOf computes the line-start set of expr (Go syntax, as regexp.Compile
// reads it). It errs on the safe side: whatever it cannot tell admits every line.
func lineStartOf(expr string) *lineStart {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return &lineStart{all: true}
	}
	re = re.Simplify()
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	if len(subs) == 0 || (subs[0].Op != syntax.OpBeginText && subs[0].Op != syntax.OpBeginLine) {
		return &lineStart{all: true} // not anchored: a match may start anywhere
	}
	s := &lineStart{}
	if nullable := firstBytes(&syntax.Regexp{Op: syntax.OpConcat, Sub: subs[1:]}, s); nullable {
		return &lineStart{all: true}
	}
	return s
}

// firstBytes adds to s the bytes a match of re can start with, and reports
// whether re can match the empty string (then what follows it counts too).
func firstBytes(re *syntax.Regexp, s *lineStart) (nullable bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return true
		}
		r := re.Rune[0]
		addRune(s, r)
		if re.Flags&syntax.FoldCase != 0 {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				addRune(s, f)
			}
		}
		return false
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			for c := lo; c <= hi && c < utf8.RuneSelf; c++ {
				s.b[c] = true
			}
			if hi >= utf8.RuneSelf {
				for c := 0xC0; c <= 0xFF; c++ { // any multi-byte sequence's lead byte
					s.b[c] = true
				}
			}
		}
		return false
	case syntax.OpCapture, syntax.OpPlus:
		return firstBytes(re.Sub[0], s)
	case syntax.OpStar, syntax.OpQuest:
		firstBytes(re.Sub[0], s)
		return true
	case syntax.OpRepeat:
		return firstBytes(re.Sub[0], s) || re.Min == 0
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !firstBytes(sub, s) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		nullable := false
		for _, sub := range re.Sub {
			if firstBytes(sub, s) {
				nullable = true
			}
		}
		return nullable
	}
	s.all = true // any character, or an op this does not know
	return false
}

func addRune(s *lineStart, r rune) {
	var buf [utf8.UTFMax]byte
	utf8.EncodeRune(buf[:], r)
	s.b[buf[0]] = true
}
