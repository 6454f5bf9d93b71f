package claims

import (
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// The *In methods give what Locate, Parse and StripBlock give, whether the
// location is remembered or not, for parsers of different markers sharing one
// Locations and more answers than it keeps.
func TestLocationsReuseOnlyTheSameTextAndMarker(t *testing.T) {
	t.Parallel()
	ra3 := newRA3Parser(t)
	other, err := NewParser(&knowledge.ClaimsContract{Marker: "[claims]"}, ra3Evidence())
	if err != nil {
		t.Fatal(err)
	}
	none, err := NewParser(nil, ra3Evidence())
	if err != nil {
		t.Fatal(err)
	}
	block := "```json\n" + claimsJSON + "\n```\n"
	// Under each marker the block is another one (or none is marked), so a
	// location reused across markers or texts is wrong.
	texts := []string{
		ra3Marker + "\n" + block + "[claims]\n```json\n" + otherJSON + "\n```\n",
		"[claims]\n" + block + ra3Marker + "\n```json\n" + otherJSON + "\n```\n",
		ra3Marker + "\n" + block,
		"[claims]\n" + block,
		"分析。\n" + claimsJSON,
		"没有声明。",
		benchCleanAnswer(t),
	}
	ex := &interceptors.Exchange{}
	if LocationsOf(ex) != nil {
		t.Fatal("a new exchange has Locations")
	}
	l := AttachLocations(ex)
	if LocationsOf(ex) != l {
		t.Fatal("LocationsOf does not return the attached Locations")
	}
	for round := range 3 {
		for _, s := range texts {
			for _, p := range []*Parser{ra3, other, none} {
				// A copy: equal texts in other memory, as decoding an answer twice gives.
				s = strings.Clone(s)
				if got, want := p.LocateIn(l, s), p.Locate(s); !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d, marker %q: LocateIn(%q) = %+v, Locate gives %+v", round, p.marker, s, got, want)
				}
				if got, want := p.ParseIn(l, s, Required), p.Parse(s, Required); !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d, marker %q: ParseIn(%q) = %+v, Parse gives %+v", round, p.marker, s, got, want)
				}
				if got, want := p.StripBlockIn(l, s), p.StripBlock(s); got != want {
					t.Fatalf("round %d, marker %q: StripBlockIn(%q) = %q, StripBlock gives %q", round, p.marker, s, got, want)
				}
				if got, want := p.StripBlockIn(nil, s), p.StripBlock(s); got != want {
					t.Fatalf("without Locations, StripBlockIn(%q) = %q, StripBlock gives %q", s, got, want)
				}
			}
		}
	}
}

// A remembered location is served without locating again.
func TestLocationsRecall(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	var l Locations
	s := benchCleanAnswer(t)
	want := p.LocateIn(&l, s)
	l.entries[0].loc.Span.Start++ // a remembered location is returned as it is
	if got := p.LocateIn(&l, strings.Clone(s)); got.Span.Start != want.Span.Start+1 {
		t.Fatalf("the second LocateIn located again: %+v", got)
	}
}

// Choices validated at the same time share the request's Locations (run with
// -race).
func TestLocationsConcurrent(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	l := &Locations{}
	texts := []string{benchCleanAnswer(t), answer18(), fenced("分析。", claimsJSON), "无"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				s := texts[(g+i)%len(texts)]
				if got, want := p.LocateIn(l, s), p.Locate(s); !reflect.DeepEqual(got, want) {
					t.Errorf("LocateIn(%q) = %+v, Locate gives %+v", s, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
