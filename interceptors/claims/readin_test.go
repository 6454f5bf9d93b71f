package claims

import (
	"reflect"
	"testing"
)

// A Claims that Parse returns owns its lists: reading other answers into the
// parser's reused buffers (ReadIn) afterwards leaves it as it was.
func TestParseResultOutlivesLaterReads(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	first := answer18()
	kept := p.Parse(first, Required)
	for _, c := range loadCases(t) {
		p.ReadIn(nil, c.Answer, Required, func(*Claims) {})
		p.Parse(c.Answer, Optional)
	}
	if again := p.Parse(first, Required); !reflect.DeepEqual(kept, again) {
		t.Fatalf("a kept parse changed after later reads:\n%+v\nwant %+v", kept, again)
	}
}

// A ReadIn inside another's use gets buffers of its own: the outer read's lists
// are intact after the inner one returns.
func TestReadInNested(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	outer, inner := answer18(), fenced("分析。", claimsJSON)
	want, wantInner := p.Parse(outer, Required), p.Parse(inner, Required)
	p.ReadIn(nil, outer, Required, func(c *Claims) {
		p.ReadIn(nil, inner, Required, func(ic *Claims) {
			if !reflect.DeepEqual(ic, wantInner) {
				t.Fatalf("inner ReadIn = %+v, want %+v", ic, wantInner)
			}
		})
		if !reflect.DeepEqual(c, want) {
			t.Fatalf("outer ReadIn after an inner one = %+v, want %+v", c, want)
		}
	})
}

// Emptying the scratch drops every reference to the answer read, in the
// buffers' full capacity, so that a pooled scratch pins no answer's memory;
// release also zeroes the Claims a transient read left in it.
func TestScratchEmptyDropsTheAnswer(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	for _, content := range []string{answer18(), fenced("分析。", claimsJSON)} {
		sc := new(readScratch)
		p.parseInto(&sc.parsed, content, p.Locate(content), Required, sc, true)
		if len(sc.parsed.UnitClaims) == 0 || len(sc.evidence) == 0 || len(sc.strs) == 0 {
			t.Fatalf("the transient read left nothing in the scratch: %+v", sc.parsed)
		}
		sc.empty()
		for i, ev := range sc.evidence[:cap(sc.evidence)] {
			if !reflect.ValueOf(ev).IsZero() {
				t.Fatalf("evidence %d kept after empty: %+v", i, ev)
			}
		}
		for i, u := range sc.units[:cap(sc.units)] {
			if !reflect.ValueOf(u).IsZero() {
				t.Fatalf("unit claim %d kept after empty: %+v", i, u)
			}
		}
		for i, c := range sc.claims[:cap(sc.claims)] {
			if !reflect.ValueOf(c).IsZero() {
				t.Fatalf("claim %d kept after empty: %+v", i, c)
			}
		}
		for i, s := range sc.strs[:cap(sc.strs)] {
			if s != "" {
				t.Fatalf("string %d kept after empty: %q", i, s)
			}
		}
		sc.release()
		if !reflect.ValueOf(sc.parsed).IsZero() {
			t.Fatalf("release kept the transient Claims: %+v", sc.parsed)
		}
	}
}
