package claims

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
)

// refParseEvidence is parseEvidence as it was before the one-scan split and the
// type list (a map lookup, a count of the fields, then the split): the reference
// the differential tests compare it with.
func (p *Parser) refParseEvidence(raw string, arena *[]string) (Evidence, error) {
	ev := Evidence{Raw: raw}
	s := trimSpace(raw)
	bar := strings.IndexByte(s, '|')
	if bar < 0 {
		return ev, errNotStructured
	}
	typ, ok := p.refLookupEvidenceType(trimSpace(s[:bar]))
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

func (p *Parser) refLookupEvidenceType(name string) (evidenceType, bool) {
	if len(name) == 0 || len(name) > maxEvidenceType {
		return evidenceType{}, false
	}
	if t, ok := p.evidence[name]; ok {
		return t, true
	}
	t, ok := p.evidence[strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, name)]
	return t, ok
}

// evidenceRefParsers are parsers whose types are looked up each way: the RA3
// types (compared one by one), more types than that (hashed), and none.
func evidenceRefParsers(tb testing.TB) map[string]*Parser {
	many := ra3Evidence()
	for i := range maxScannedTypes {
		many["extra"+strconv.Itoa(i)] = make([]string, i%4)
	}
	out := map[string]*Parser{"ra3": newRA3Parser(tb)}
	for name, ev := range map[string]map[string][]string{"many types": many, "no types": nil} {
		p, err := NewParser(ra3Contract(), ev)
		if err != nil {
			tb.Fatal(err)
		}
		out[name] = p
	}
	if len(out["many types"].types) <= maxScannedTypes {
		tb.Fatalf("the many-types parser has %d types, not more than %d", len(out["many types"].types), maxScannedTypes)
	}
	return out
}

// checkEvidenceLikeReference parses raw after a few arena items both ways and
// fails when the Evidence, the error or the arena differ.
func checkEvidenceLikeReference(t *testing.T, p *Parser, raw string) {
	t.Helper()
	arena := []string{"a", "b"}
	refArena := []string{"a", "b"}
	got, err := p.parseEvidence(raw, &arena)
	want, refErr := p.refParseEvidence(raw, &refArena)
	if fmt.Sprint(err) != fmt.Sprint(refErr) {
		t.Fatalf("parseEvidence(%q) error %v; reference %v", raw, err, refErr)
	}
	if !reflect.DeepEqual(got, want) || cap(got.Params) != cap(want.Params) {
		t.Fatalf("parseEvidence(%q) = %+v (cap %d); reference %+v (cap %d)", raw, got, cap(got.Params), want, cap(want.Params))
	}
	if !reflect.DeepEqual(arena, refArena) {
		t.Fatalf("parseEvidence(%q) left the arena %q; reference %q", raw, arena, refArena)
	}
}

// TestParseEvidenceMatchesReference compares parseEvidence with the reference on
// every combination of a type, a time and up to four fields, each written a few
// ways, under each lookup.
func TestParseEvidenceMatchesReference(t *testing.T) {
	t.Parallel()
	types := []string{"", "power", " Power ", "SELECT", "move", "place", "attack", "extra3", "EXTRA15", "pOwEr", "produce\t"}
	times := []string{"", "1:24", " 01:24.0 ", "1:60", "1:02:03.5", "x", " "}
	fields := []string{"", "246", " 246 ", "SpecialPower_X", " ", "2200.0,1500.0,0.0", "中文"}
	for name, p := range evidenceRefParsers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := 0
			for _, typ := range types {
				for _, tm := range times {
					checkEvidenceLikeReference(t, p, typ)
					checkEvidenceLikeReference(t, p, typ+"|"+tm)
					for _, a := range fields {
						checkEvidenceLikeReference(t, p, typ+"|"+tm+"|"+a)
						for _, b := range fields {
							checkEvidenceLikeReference(t, p, typ+"|"+tm+"|"+a+"|"+b)
							for _, c := range fields {
								checkEvidenceLikeReference(t, p, " "+typ+"|"+tm+"|"+a+"|"+b+"|"+c+" ")
								checkEvidenceLikeReference(t, p, typ+"|"+tm+"|"+a+"|"+b+"|"+c+"|"+a)
								n += 2
							}
						}
					}
				}
			}
			for _, raw := range []string{"|", "||", "|||", "power||||||", "1:23 选择了 904", "sell|1:24|512|", "move|1:31|"} {
				checkEvidenceLikeReference(t, p, raw)
			}
			if n < 30000 {
				t.Fatalf("compared only %d items", n)
			}
		})
	}
}

func FuzzParseEvidenceReference(f *testing.F) {
	for _, s := range []string{
		"build|0:02.10|AlliedPowerPlant|246", "place|0:07.80|AlliedPowerPlant|246|1204.5,880.0,12.0",
		" SELECT | 01:24.0 | 587 ", "power|1:24| |246", "|||", "sell|1:60|5", "extra3|1:00|a|b|c", "Extra0|1:00",
	} {
		f.Add(s)
	}
	parsers := evidenceRefParsers(f)
	f.Fuzz(func(t *testing.T, raw string) {
		for _, p := range parsers {
			checkEvidenceLikeReference(t, p, raw)
		}
	})
}
