package claims

// Locate as it was before markerOutside (a second forward pass of strings.Index
// over the whole answer for the marker outside the block): the reference the
// differential test compares Locate with.

import (
	"reflect"
	"strings"
	"testing"

	"github.com/factgate/factgate/knowledge"
)

func (p *Parser) refLocate(content string) Location {
	var loc Location
	last := -1
	if p.marker != "" {
		last = lastIndex(content, p.marker)
		if last >= 0 {
			if f, ok := lastJSONFence(content, last+len(p.marker)); ok {
				loc = Location{Found: true, Span: f.body, Fenced: true, Fence: f.whole}
			}
		}
	}
	if !loc.Found {
		loc = p.fallback(content)
	}
	for from := 0; last >= 0; {
		i := strings.Index(content[from:], p.marker)
		if i < 0 {
			break
		}
		m := Span{from + i, from + i + len(p.marker)}
		if !loc.Found || m.End <= loc.Fence.Start || m.Start >= loc.Fence.End {
			loc.Marker, loc.MarkerSpan = true, m
		}
		from = m.Start + 1
	}
	return loc
}

// locateMarkers are the pack's marker, markers that overlap themselves or the
// fences, ASCII ones and none.
var locateMarkers = []string{ra3Marker, "声明", "机机", "«»", "[机]", "[[", "ab", "```", ""}

func locateParsers(tb testing.TB) []*Parser {
	tb.Helper()
	var ps []*Parser
	for _, m := range locateMarkers {
		p, err := NewParser(&knowledge.ClaimsContract{Marker: m}, nil)
		if err != nil {
			tb.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// checkLocateAsTwoPass compares Locate with the two-pass reference.
func checkLocateAsTwoPass(t *testing.T, ps []*Parser, content string) {
	t.Helper()
	for _, p := range ps {
		if got, want := p.Locate(content), p.refLocate(content); !reflect.DeepEqual(got, want) {
			t.Fatalf("marker %q: Locate(%q) = %+v\nthe two-pass reference gives %+v", p.marker, content, got, want)
		}
	}
}

// locateSeeds add markers inside, before and after blocks (fenced and found by
// the fallback), and markers that overlap themselves.
func locateSeeds(tb testing.TB) []string {
	block := "```json\n" + claimsJSON + "\n```\n"
	many := strings.Repeat("机", 200)
	seeds := append(fenceSeeds(tb), benchCleanAnswer(tb),
		ra3Marker+"\n"+block+ra3Marker,
		ra3Marker+"\n```json\n{\"claim\": \""+ra3Marker+"\", \"unitClaims\": []}\n```\n",
		"x "+ra3Marker+" y\n"+claimsJSON+"\n"+ra3Marker,
		"前 "+ra3Marker+"\n{\"unitClaims\": [{\"claim\": \""+ra3Marker+"\"}]}\n",
		many+ra3Marker+many+ra3Marker+"\n"+block+many,
		many+"[机]"+many+"[机]"+many+"\n"+block+"[机]",
		strings.Repeat("机机", 300)+"机\n"+block,
		strings.Repeat("«", 500)+"«»\n"+block+"»«»",
		"声明声明声明\n"+block+"声明",
		"ab[[[ab\n{\"unitClaims\": [\"ab [[\"]}\n[[ab",
	)
	return seeds
}

func TestLocateAsTwoPass(t *testing.T) {
	t.Parallel()
	ps := locateParsers(t)
	for _, s := range locateSeeds(t) {
		checkLocateAsTwoPass(t, ps, s)
	}
}

func FuzzLocateAsTwoPass(f *testing.F) {
	for _, s := range locateSeeds(f) {
		f.Add(s)
	}
	ps := locateParsers(f)
	f.Fuzz(func(t *testing.T, s string) {
		checkLocateAsTwoPass(t, ps, s)
	})
}
