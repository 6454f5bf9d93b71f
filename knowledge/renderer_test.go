package knowledge

import (
	"fmt"
	"sync"
	"testing"
)

func TestRendererCachesPerSetAndScopes(t *testing.T) {
	t.Parallel()
	s, _ := builtinSet(t, "ra3")
	r := NewRenderer(2)
	ab := Scopes{"factions": {"盟军", "苏联"}}
	ba := Scopes{"factions": {"苏联", "盟军"}}

	first := r.Render(s, ab)
	if first != Render(s, ab) {
		t.Fatal("cached render differs from Render")
	}
	if again := r.Render(s, Scopes{"factions": {"盟军", "苏联"}, "unrelated": {"x"}}); again != first {
		t.Fatal("a dimension the set does not have changed the render")
	}
	if st := r.Stats(); st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("stats = %+v, want 1 hit 1 miss", st)
	}
	if r.Render(s, ba) == first {
		t.Fatal("player order must change the render")
	}
	// Capacity 2: a third key evicts the least recently used (ab).
	r.Render(s, Scopes{"maps": {"map_mp_2_rao1"}})
	if st := r.Stats(); st.Size != 2 {
		t.Fatalf("size = %d, want the cap 2", st.Size)
	}
	r.Render(s, ab)
	if st := r.Stats(); st.Misses != 4 {
		t.Fatalf("misses = %d, want 4 (ab was evicted)", st.Misses)
	}
}

func TestRendererIsConcurrencySafe(t *testing.T) {
	t.Parallel()
	s, _ := builtinSet(t, "ra3-corona")
	r := NewRenderer(4)
	scopes := []Scopes{
		{"factions": {"盟军"}}, {"factions": {"苏联"}}, {"factions": {"帝国"}},
		{"factions": {"神州"}}, {"factions": {"盟军", "神州"}}, {"maps": {"map_mp_2_feasel1"}},
	}
	want := make([]string, len(scopes))
	for i, sc := range scopes {
		want[i] = Render(s, sc)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				k := (g + i) % len(scopes)
				if got := r.Render(s, scopes[k]); got != want[k] {
					t.Errorf("goroutine %d: wrong render for %v", g, scopes[k])
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

func BenchmarkRendererHit(b *testing.B) {
	s, _ := builtinSet(b, "ra3")
	r := NewRenderer(0)
	scopes := Scopes{"factions": {"盟军", "苏联"}, "maps": {"map_mp_2_rao1"}}
	r.Render(s, scopes)
	b.ReportAllocs()
	for b.Loop() {
		if len(r.Render(s, scopes)) == 0 {
			b.Fatal("empty")
		}
	}
}

func BenchmarkRenderUncached(b *testing.B) {
	s, _ := builtinSet(b, "ra3")
	scopes := Scopes{"factions": {"盟军", "苏联"}, "maps": {"map_mp_2_rao1"}}
	b.ReportAllocs()
	for b.Loop() {
		_ = Render(s, scopes)
	}
}

func BenchmarkAssetsWithTag(b *testing.B) {
	s, _ := builtinSet(b, "ra3")
	tag := SpecialPowerTag("SpecialPower_UnpackReplaceSelf")
	b.ReportAllocs()
	for b.Loop() {
		if len(s.AssetsWithTag("factions", "盟军", tag)) != 2 {
			b.Fatal("wrong answer")
		}
	}
}

func BenchmarkHasTag(b *testing.B) {
	s, _ := builtinSet(b, "ra3")
	b.ReportAllocs()
	for b.Loop() {
		if !s.HasTag("factions", "盟军", "AlliedMCV", "builder") {
			b.Fatal("wrong answer")
		}
	}
}

func ExampleSet_AssetsWithTag() {
	reg, err := Builtin()
	if err != nil {
		panic(err)
	}
	set, _ := reg.Set("ra3")
	fmt.Println(set.AssetsWithTag("factions", "盟军", SpecialPowerTag("SpecialPower_UnpackReplaceSelf")))
	// Output: [AlliedMiner AlliedMCV]
}
