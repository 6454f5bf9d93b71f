package claims

import (
	"fmt"
	"strings"
)

// Level is a claim's evidence level. The zero value is Uncertain, which is also
// the level of a claim whose level is missing or unknown.
type Level uint8

// The evidence levels of seed 001.
const (
	Uncertain Level = iota
	Possible
	HighlyLikely
	Confirmed
	RuledOut
)

var levelNames = [...]string{
	Uncertain:    "uncertain",
	Possible:     "possible",
	HighlyLikely: "highly likely",
	Confirmed:    "confirmed",
	RuledOut:     "ruled out",
}

// String returns the canonical English spelling ("highly likely").
func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// AtLeastHighlyLikely reports a confident positive claim (confirmed or highly
// likely), the only levels the WeakEvidence rules apply to.
func (l Level) AtLeastHighlyLikely() bool { return l == Confirmed || l == HighlyLikely }

// Hedged reports a possible or uncertain claim, one that should name
// alternatives or what needs confirmation.
func (l Level) Hedged() bool { return l == Possible || l == Uncertain }

// RulesOut reports a claim that asserts the opposite of its identity; identity
// rules skip it.
func (l Level) RulesOut() bool { return l == RuledOut }

// MarshalText renders the canonical spelling.
func (l Level) MarshalText() ([]byte, error) {
	if int(l) >= len(levelNames) {
		return nil, fmt.Errorf("claims: invalid evidence level %d", uint8(l))
	}
	return []byte(levelNames[l]), nil
}

// UnmarshalText reads an English spelling (see ParseLevel).
func (l *Level) UnmarshalText(b []byte) error {
	v, ok := ParseLevel(string(b))
	if !ok {
		return fmt.Errorf("claims: unknown evidence level %q (want confirmed, highly likely, possible, uncertain or ruled out)", b)
	}
	*l = v
	return nil
}

// englishLevels maps the separator-free lower-case English spellings to levels.
var englishLevels = map[string]Level{
	"uncertain":    Uncertain,
	"possible":     Possible,
	"highlylikely": HighlyLikely,
	"confirmed":    Confirmed,
	"ruledout":     RuledOut,
}

// canonicalLevel reads the canonical spellings (Level.String), which answers
// nearly always use, without building their key: every Parser maps them to the
// same levels as ParseLevel does, since NewParser refuses a pack spelling whose
// key already means another level.
func canonicalLevel(s string) (Level, bool) {
	switch s {
	case "confirmed":
		return Confirmed, true
	case "highly likely":
		return HighlyLikely, true
	case "possible":
		return Possible, true
	case "uncertain":
		return Uncertain, true
	case "ruled out":
		return RuledOut, true
	}
	return Uncertain, false
}

// maxLevelKey bounds the length of a level spelling; longer values are unknown.
const maxLevelKey = 64

// levelKey writes the comparison form of a level spelling into buf: trimmed, ASCII
// lower-cased, with spaces, tabs, "_" and "-" removed. It reports false when the
// spelling is empty or longer than maxLevelKey bytes.
func levelKey(s string, buf *[maxLevelKey]byte) ([]byte, bool) {
	s = strings.TrimSpace(s)
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '_' || c == '-':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if n == len(buf) {
			return nil, false
		}
		buf[n] = c
		n++
	}
	return buf[:n], n > 0
}

// ParseLevel reads an English evidence level in any ASCII case, with spaces, "_"
// or "-" between the words or none ("Highly_Likely", "RULED-OUT"). It reports
// false for anything else. A Parser also accepts its pack's extra spellings.
func ParseLevel(s string) (Level, bool) {
	var buf [maxLevelKey]byte
	k, ok := levelKey(s, &buf)
	if !ok {
		return Uncertain, false
	}
	l, ok := englishLevels[string(k)]
	return l, ok
}
