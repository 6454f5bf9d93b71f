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
	// The fields after the type, split in one scan: the time, then the parameters
	// as written, appended to the arena (and taken back on error). Only a text with
	// more fields than the type takes is scanned again, to count them.
	start := len(*arena)
	timeRaw, rest, more := cutBar(s[bar+1:])
	fields := 1
	for more && fields <= typ.arity {
		var field string
		field, rest, more = cutBar(rest)
		*arena = append(*arena, field)
		fields++
	}
	if more {
		fields += strings.Count(rest, "|") + 1
	}
	if fields != typ.arity+1 {
		*arena = (*arena)[:start]
		return ev, fmt.Errorf("%s evidence takes a time and %d parameter(s), got %d field(s) after the type", typ.name, typ.arity, fields)
	}
	timeRaw = trimSpace(timeRaw)
	t, ok := interceptors.ParseClock(timeRaw)
	if !ok {
		*arena = (*arena)[:start]
		return ev, fmt.Errorf("time %q is not a game-clock time like 1:24.00", timeRaw)
	}
	params := (*arena)[start:]
	for n := range params {
		if params[n] = trimSpace(params[n]); params[n] == "" {
			*arena = (*arena)[:start]
			return ev, fmt.Errorf("%s evidence parameter %d is empty", typ.name, n+1)
		}
	}
	ev.Structured = true
	ev.Type = typ.name
	ev.Time = t
	ev.TimeRaw = timeRaw
	if typ.arity > 0 {
		ev.Params = params[:len(params):len(params)]
	}
	return ev, nil
}

// cutBar is strings.Cut(s, "|").
func cutBar(s string) (before, after string, found bool) {
	if i := strings.IndexByte(s, '|'); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// maxScannedTypes is the number of evidence types up to which a lookup compares
// the names one by one: for a pack's handful of types that is several times
// cheaper than hashing the name.
const maxScannedTypes = 16

// lookupEvidenceType finds a declared type in any ASCII case without allocating.
func (p *Parser) lookupEvidenceType(name string) (evidenceType, bool) {
	if len(name) == 0 || len(name) > maxEvidenceType {
		return evidenceType{}, false
	}
	if len(p.types) <= maxScannedTypes {
		for _, t := range p.types {
			if t.name == name {
				return t, true
			}
		}
	} else if t, ok := p.evidence[name]; ok {
		return t, true
	}
	var buf [maxEvidenceType]byte
	upper := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
			upper = true
		}
		buf[i] = c
	}
	if !upper {
		return evidenceType{}, false // the name is its own lower case: not declared
	}
	t, ok := p.evidence[string(buf[:len(name)])]
	return t, ok
}
