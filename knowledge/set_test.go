package knowledge

import (
	"slices"
	"testing"
)

// builtinSet returns a built-in set or fails the test.
func builtinSet(t testing.TB, name string) (*Set, *Pack) {
	t.Helper()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	s, p := reg.Set(name)
	if s == nil {
		t.Fatalf("no built-in set %q", name)
	}
	return s, p
}

func TestAssetsWithTagAnswersTheValidatorsQuestions(t *testing.T) {
	t.Parallel()
	ra3, _ := builtinSet(t, "ra3")
	corona, _ := builtinSet(t, "ra3-corona")
	tests := []struct {
		name       string
		set        *Set
		dim, scope string
		tag        string
		want       []string
	}{
		{"allied unpack: MCV and miner", ra3, "factions", "盟军", "specialPower:SpecialPower_UnpackReplaceSelf", []string{"AlliedMiner", "AlliedMCV"}},
		{"allied pack: the construction yard", ra3, "factions", "盟军", "specialPower:SpecialPower_PackReplaceSelf", []string{"AlliedConstructionYard"}},
		{"soviet unpack: only the MCV", ra3, "factions", "苏联", "specialPower:SpecialPower_UnpackReplaceSelf", []string{"SovietMCV"}},
		{"soviet builders", ra3, "factions", "苏联", "builder", []string{"SovietMCV", "SovietMCV_Naval", "SovietConstructionYard", "SovietCrane"}},
		{"japan tengu transform", ra3, "factions", "帝国", "specialPower:SpecialPower_JAIV_Transform", []string{"JapanAntiInfantryVehicle"}},
		{"celestial only in corona", corona, "factions", "神州", "builder", []string{"CelestialMCV"}},
		{"no celestial in ra3", ra3, "factions", "神州", "builder", nil},
		{"unknown tag", ra3, "factions", "盟军", "flying", nil},
		{"global rules", ra3, "", "", "rule", []string{"rule-evidence-first", "rule-oplog", "rule-unit-identity", "rule-movement-transport", "rule-allied-unpack-ambiguity"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.set.AssetsWithTag(tc.dim, tc.scope, tc.tag); !slices.Equal(got, tc.want) {
				t.Fatalf("AssetsWithTag(%q, %q, %q) = %v, want %v", tc.dim, tc.scope, tc.tag, got, tc.want)
			}
		})
	}
}

// A scope's view answers every question as the set does about that scope.
func TestScopeViewAnswersAsTheSet(t *testing.T) {
	t.Parallel()
	ra3, _ := builtinSet(t, "ra3")
	tags := []string{"builder", "flying", "rule", "specialPower:SpecialPower_PackReplaceSelf"}
	scopes := []Scope{GlobalScope, {"factions", "no such faction"}, {"no such dimension", "盟军"}}
	for _, dim := range ra3.Dimensions {
		for _, v := range ra3.ScopeValues(dim) {
			scopes = append(scopes, Scope{dim, v})
		}
	}
	for _, sc := range scopes {
		v := ra3.View(sc.Dimension, sc.Value)
		if v.Exists() != ra3.HasScope(sc.Dimension, sc.Value) {
			t.Fatalf("View(%v).Exists() = %v", sc, v.Exists())
		}
		ids := []string{"AlliedMCV", "SovietMCV", "nothing"}
		for _, e := range ra3.ScopeEntries(sc.Dimension, sc.Value) {
			ids = append(ids, e.ID)
			tags = append(tags, e.Tags...)
		}
		for _, id := range ids {
			e := v.Entry(id)
			if (e != nil) != ra3.Has(sc.Dimension, sc.Value, id) || e != nil && e.ID != id {
				t.Fatalf("View(%v).Entry(%q) = %v", sc, id, e)
			}
			for _, tag := range tags {
				if e != nil && e.HasTag(tag) != ra3.HasTag(sc.Dimension, sc.Value, id, tag) {
					t.Fatalf("View(%v).Entry(%q).HasTag(%q) differs from the set's", sc, id, tag)
				}
			}
		}
		for _, tag := range tags {
			if got, want := v.AssetsWithTag(tag), ra3.AssetsWithTag(sc.Dimension, sc.Value, tag); !slices.Equal(got, want) {
				t.Fatalf("View(%v).AssetsWithTag(%q) = %v, want %v", sc, tag, got, want)
			}
		}
	}
	var none *Set
	if v := none.View("factions", "盟军"); v.Exists() || v.Entry("AlliedMCV") != nil || v.AssetsWithTag("builder") != nil {
		t.Fatal("a nil set has a scope")
	}
}

func TestSetQueries(t *testing.T) {
	t.Parallel()
	s, _ := builtinSet(t, "ra3")
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"HasTag AlliedMCV builder", s.HasTag("factions", "盟军", "AlliedMCV", "builder"), true},
		{"HasTag fighter unpack power", s.HasTag("factions", "盟军", "AlliedFighterAircraft", "specialPower:SpecialPower_UnpackReplaceSelf"), false},
		{"HasTag in another faction's scope", s.HasTag("factions", "苏联", "AlliedMCV", "builder"), false},
		{"Has own asset", s.Has("factions", "盟军", "AlliedAirfield"), true},
		{"Has another faction's asset", s.Has("factions", "盟军", "SovietWarFactory"), false},
		{"Has in unknown scope", s.Has("factions", "神州", "CelestialMCV"), false},
		{"Has global rule", s.Has("", "", "rule-oplog"), true},
		{"ScopeValues factions", s.ScopeValues("factions"), []string{"盟军", "苏联", "帝国"}},
		{"ScopeValues maps", len(s.ScopeValues("maps")), 5},
		{"ScopeValues unknown", s.ScopeValues("eras"), []string(nil)},
		{"HasScope", s.HasScope("maps", "map_mp_2_rao1"), true},
		{"Lookup an id in one scope", len(s.Lookup("AlliedMCV")), 1},
		{"Lookup an id in every map", len(s.Lookup("map-overview")), 5},
		{"Lookup unknown", len(s.Lookup("Nope")), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !equalAny(tc.got, tc.want) {
				t.Fatalf("got %v, want %v", tc.got, tc.want)
			}
		})
	}

	e, ok := s.Entry("factions", "盟军", "AlliedMiner")
	if !ok || !e.HasTag("unpack") || e.Text == "" {
		t.Fatalf("Entry(AlliedMiner) = %+v, %v", e, ok)
	}
	if _, ok := s.Entry("factions", "盟军", "SovietMiner"); ok {
		t.Fatal("Entry found a Soviet asset in the Allied scope")
	}
}

func equalAny(a, b any) bool {
	as, aok := a.([]string)
	bs, bok := b.([]string)
	if aok && bok {
		return slices.Equal(as, bs)
	}
	return a == b
}

func TestWithTagIsInRenderOrder(t *testing.T) {
	t.Parallel()
	s, _ := builtinSet(t, "ra3-corona")
	var got []string
	for _, se := range s.WithTag("specialPower:SpecialPower_UnpackReplaceSelf") {
		got = append(got, se.Scope.String()+" "+se.Entry.ID)
	}
	want := []string{"factions/盟军 AlliedMiner", "factions/盟军 AlliedMCV", "factions/苏联 SovietMCV", "factions/帝国 JapanMCV"}
	if !slices.Equal(got, want) {
		t.Fatalf("WithTag = %v, want %v", got, want)
	}
}

func TestEntriesFollowsTheRequestedScopes(t *testing.T) {
	t.Parallel()
	s, _ := builtinSet(t, "ra3")
	got := s.Entries(Scopes{"factions": {"苏联", "盟军", "苏联", "神州"}, "maps": {"map_mp_2_rao1"}})
	var scopes []string
	for _, se := range got {
		if n := len(scopes); n == 0 || scopes[n-1] != se.Scope.String() {
			scopes = append(scopes, se.Scope.String())
		}
	}
	want := []string{"global", "factions/苏联", "factions/盟军", "maps/map_mp_2_rao1"}
	if !slices.Equal(scopes, want) {
		t.Fatalf("scopes in order = %v, want %v (player order, duplicates and unknown values skipped)", scopes, want)
	}
}

func TestEveryAssetCarriesItsKindAndThePowersItUses(t *testing.T) {
	t.Parallel()
	s, _ := builtinSet(t, "ra3-corona")
	kinds := []string{"infantry", "vehicle", "aircraft", "naval", "structure"}
	for _, fac := range s.ScopeValues("factions") {
		for _, e := range s.ScopeEntries("factions", fac) {
			if !slices.ContainsFunc(e.Tags, func(t string) bool { return slices.Contains(kinds, t) }) {
				t.Errorf("%s/%s has no kind tag: %v", fac, e.ID, e.Tags)
			}
		}
	}
	// Construction yards pack; the Allied yard also carries the Chrono Swap protocol.
	for _, id := range []string{"AlliedConstructionYard", "SovietConstructionYard", "JapanConstructionYard"} {
		if len(s.Lookup(id)) != 1 || !s.Lookup(id)[0].Entry.HasTag("specialPower:SpecialPower_PackReplaceSelf") {
			t.Errorf("%s lacks specialPower:SpecialPower_PackReplaceSelf", id)
		}
	}
}
