package claims

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/factgate/factgate/interceptors"
)

// Evidence is one item of a claim's evidence list.
type Evidence struct {
	// Path locates the item: "unitClaims[4].evidence[0]".
	Path string
	// Raw is the item as the model wrote it (a string's decoded value, or the JSON
	// text of a non-string item).
	Raw string
	// Structured reports that Raw parsed as "type|time|p1|p2..."; when false, Type,
	// Time, TimeRaw and Params are zero and no fact rule applies to the item.
	Structured bool
	// Type is the evidence type in the pack's lower-case spelling ("power").
	Type string
	// Time is the normalised game-clock time (1:24 = 1:24.00 = 84s).
	Time time.Duration
	// TimeRaw is the time as written, trimmed ("1:24").
	TimeRaw string
	// Params are the parameters after the time, trimmed, in order; exactly as many
	// as the pack declares for Type. Never empty strings.
	Params []string
}

// evidenceType is one structured evidence type the pack declares.
type evidenceType struct {
	name  string // lower case
	arity int
}

// maxEvidenceType bounds the length of an evidence type name.
const maxEvidenceType = 64

// ParseEvidence reads one structured evidence string "type|time|p1|p2...". The
// returned Evidence always carries Raw; on error it is unstructured and the error
// says why (unknown type, wrong number of parameters, bad time, empty parameter).
// Path is left empty.
func (p *Parser) ParseEvidence(raw string) (Evidence, error) {
	var params []string
	return p.parseEvidence(raw, &params)
}

// errNotStructured is the reason for an item without the "type|time|..." shape.
var errNotStructured = errors.New(`not in "type|time|param..." form`)

// parseEvidence parses raw, appending its parameters to *arena (which it shares with
// the other items of one Parse call, to allocate once).
func (p *Parser) parseEvidence(raw string, arena *[]string) (Evidence, error) {
	ev := Evidence{Raw: raw}
	s := trimSpace(raw)
	bar := strings.IndexByte(s, '|')
	if bar < 0 {
		return ev, errNotStructured
	}
	typ, ok := p.lookupEvidenceType(trimSpace(s[:bar]))
	if !ok {
		if len(p.evidence) == 0 {
			return ev, errNotStructured
		}
		return ev, fmt.Errorf("unknown evidence type %q (want one of %s)", strings.TrimSpace(s[:bar]), p.evidenceNames)
	}
	rest := s[bar+1:]
	if parts := strings.Count(rest, "|") + 1; parts != typ.arity+1 {
		return ev, fmt.Errorf("%s evidence takes a time and %d parameter(s), got %d field(s) after the type", typ.name, typ.arity, parts)
	}
	timeRaw := rest
	if bar = strings.IndexByte(rest, '|'); bar >= 0 {
		timeRaw, rest = rest[:bar], rest[bar+1:]
	} else {
		rest = ""
	}
	timeRaw = trimSpace(timeRaw)
	t, ok := interceptors.ParseClock(timeRaw)
	if !ok {
		return ev, fmt.Errorf("time %q is not a game-clock time like 1:24.00", timeRaw)
	}
	start := len(*arena)
	for n := 0; n < typ.arity; n++ {
		field := rest
		if bar = strings.IndexByte(rest, '|'); bar >= 0 {
			field, rest = rest[:bar], rest[bar+1:]
		}
		field = trimSpace(field)
		if field == "" {
			*arena = (*arena)[:start]
			return ev, fmt.Errorf("%s evidence parameter %d is empty", typ.name, n+1)
		}
		*arena = append(*arena, field)
	}
	ev.Structured = true
	ev.Type = typ.name
	ev.Time = t
	ev.TimeRaw = timeRaw
	if typ.arity > 0 {
		ev.Params = (*arena)[start:len(*arena):len(*arena)]
	}
	return ev, nil
}

// lookupEvidenceType finds a declared type in any ASCII case without allocating.
func (p *Parser) lookupEvidenceType(name string) (evidenceType, bool) {
	if len(name) == 0 || len(name) > maxEvidenceType {
		return evidenceType{}, false
	}
	if t, ok := p.evidence[name]; ok {
		return t, true
	}
	var buf [maxEvidenceType]byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	t, ok := p.evidence[string(buf[:len(name)])]
	return t, ok
}
