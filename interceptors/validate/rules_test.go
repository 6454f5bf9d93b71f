package validate

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/knowledge"
)

// testLog is a small operation log in the RA3 format (OPLOG.md). Alice plays 盟军,
// Boris 苏联. 100 is Alice's construction yard; 200 unpacks (MCV or miner); 300 is
// her airfield; 310 is first seen before her first bomber, 311 exactly at it; 501
// is a Soviet unit that unpacks (as a Soviet MCV can); 503 uses a power only
// Allied assets carry in the set.
const testLog = `Mod: default
地图: map_test
玩家: Alice (盟军); Boris (苏联)
录像时长: 10:00.00
0:05.00 Alice 开始建造建筑 AlliedPowerPlant [UnitId]100(建造者)
0:07.00 Alice 放置建筑 AlliedPowerPlant [UnitId]100(建造者) @ (1204.5,880.0,12.0)
0:20.00 Alice 生产单位 AlliedMiner [UnitId]100(生产者)
0:30.00 Alice 生产单位 AlliedFighterAircraft [UnitId]300(生产者)
1:00.00 Alice 选择 [UnitId]200 [UnitId]201
1:10.00 Alice 使用 SpecialPower_UnpackReplaceSelf [UnitId]200
1:30.00 Alice 使用 SpecialPower_PackReplaceSelf [UnitId]100
2:00.00 Alice 生产单位 AlliedFighterAircraft [UnitId]300(生产者)
2:30.00 Alice 选择 [UnitId]310
3:00.00 Alice 生产单位 AlliedBomberAircraft [UnitId]300(生产者)
3:00.00 Alice 选择 [UnitId]311
4:00.00 Boris 开始建造建筑 SovietPowerPlant [UnitId]500(建造者)
4:10.00 Boris 使用 SpecialPower_UnpackReplaceSelf [UnitId]501
4:15.00 Boris 使用 SpecialPower_ShrinkRay [UnitId]503
4:20.00 Boris 出售 [UnitId]502
4:30.00 Boris 移动 @ (1.0,2.0,3.0)
`

// answer wraps a claims object in an answer with the RA3 marker.
func answer(claimsJSON string) string {
	return "分析正文。\n\n[机器可读声明]\n```json\n" + claimsJSON + "\n```\n"
}

// unitClaims builds a claims object with only unit claims.
func unitClaims(items ...string) string {
	return `{"unitClaims":[` + strings.Join(items, ",") + `],"eventClaims":[],"timelineClaims":[]}`
}

// unit builds one unit claim; alternatives default to one so that hedged claims are
// complete unless a case says otherwise.
func unit(id, player, claim, level string, evidence ...string) string {
	return unitWith(id, player, claim, level, `["X"]`, evidence...)
}

func unitWith(id, player, claim, level, alternatives string, evidence ...string) string {
	ev := make([]string, len(evidence))
	for i, e := range evidence {
		ev[i] = `"` + e + `"`
	}
	return `{"unitId":` + id + `,"player":"` + player + `","claim":"` + claim + `","evidenceLevel":"` + level +
		`","evidence":[` + strings.Join(ev, ",") + `],"alternatives":` + alternatives + `,"needsConfirmation":[]}`
}

type testEnv struct {
	checker *Checker
	input   Input
}

// newEnv checks answers against text (an operation log) with the ra3 set and the
// header's players.
func newEnv(tb testing.TB, cfg Config, text string) testEnv {
	tb.Helper()
	pack := ra3Pack(tb)
	c, err := NewChecker(pack, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	x, err := facts.NewExtractor(pack.Facts)
	if err != nil {
		tb.Fatal(err)
	}
	ix, err := x.Extract(text)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := knowledge.ExtractContext(pack, text)
	set := pack.Set(ctx.KnowledgeSet)
	if set == nil {
		tb.Fatalf("no set %q", ctx.KnowledgeSet)
	}
	return testEnv{checker: c, input: Input{Index: ix, Set: set, Players: ctx.Players, Scopes: ctx.Scopes}}
}

func TestRules(t *testing.T) {
	t.Parallel()
	env := newEnv(t, Config{}, testLog)
	type tc struct {
		name   string
		claims string
		want   []string // code|severity|path, every issue at any severity
	}
	cases := []tc{
		{"hedged claim with alternatives and a true citation is clean",
			unitClaims(unit("200", "Alice", "AlliedMCV", "possible", "power|1:10.00|SpecialPower_UnpackReplaceSelf|200")), nil},
		{"time spellings normalise: 1:10 = 1:10.00 = 01:10.0",
			unitClaims(unit("200", "Alice", "AlliedMCV", "possible", "power|1:10|SpecialPower_UnpackReplaceSelf|200", "select|01:00.0|200")), nil},
		{"positions compare as numbers",
			unitClaims(unit("100", "Alice", "AlliedConstructionYard", "confirmed", "place|0:07|AlliedPowerPlant|100|1204.50,880,12.0")), nil},
		{"a selection of several units matches any of them",
			unitClaims(unit("201", "Alice", "AlliedMCV", "possible", "select|1:00.00|201")), nil},

		// claim.no_evidence
		{"confirmed unit claim without evidence",
			unitClaims(unit("100", "Alice", "AlliedConstructionYard", "confirmed")),
			[]string{"claim.no_evidence|WeakEvidence|unitClaims[0]"}},
		{"event and timeline claims without evidence",
			`{"unitClaims":[],"eventClaims":[{"claim":"迁移","evidenceLevel":"highly likely","evidence":[]}],"timelineClaims":[{"claim":"两分钟内","evidenceLevel":"confirmed"}]}`,
			[]string{"claim.no_evidence|WeakEvidence|eventClaims[0]", "claim.no_evidence|WeakEvidence|timelineClaims[0]"}},
		{"hedged claims without evidence are already honest",
			`{"unitClaims":[` + unit("100", "Alice", "AlliedConstructionYard", "possible") + `],"eventClaims":[{"claim":"迁移","evidenceLevel":"uncertain"}],"timelineClaims":[]}`, nil},

		// claim.no_alternatives
		{"possible and uncertain unit claims need alternatives or needsConfirmation",
			unitClaims(unitWith("310", "Alice", "AlliedFighterAircraft", "possible", `[]`, "select|2:30|310"),
				unitWith("310", "Alice", "AlliedFighterAircraft", "uncertain", `[]`, "select|2:30|310")),
			[]string{"claim.no_alternatives|Warning|unitClaims[0]", "claim.no_alternatives|Warning|unitClaims[1]"}},
		{"an unknown level counts as uncertain",
			unitClaims(unitWith("310", "Alice", "AlliedFighterAircraft", "likely", `[]`, "select|2:30|310")),
			[]string{"claims.unknown_evidence_level|Info|unitClaims[0]", "claim.no_alternatives|Warning|unitClaims[0]"}},
		{"needsConfirmation alone is enough",
			unitClaims(`{"unitId":310,"player":"Alice","claim":"AlliedFighterAircraft","evidenceLevel":"possible","evidence":["select|2:30|310"],"needsConfirmation":["是否出现在机场附近"]}`), nil},
		{"confident and event claims need no alternatives",
			`{"unitClaims":[` + unitWith("300", "Alice", "AlliedAirfield", "confirmed", `[]`, "produce|2:00|AlliedFighterAircraft|300") + `],"eventClaims":[{"claim":"x","evidenceLevel":"possible","evidence":["select|2:30|310"]}]}`, nil},

		// unit.not_observed
		{"a UnitId on no line",
			unitClaims(unit("9999", "Alice", "AlliedMCV", "possible")),
			[]string{"unit.not_observed|Warning|unitClaims[0]"}},
		{"a UnitId seen only as a produced-by factory is observed",
			unitClaims(unit("300", "Alice", "AlliedAirfield", "possible")), nil},

		// evidence: tolerance, one issue per item, every level
		{"0.5 s off matches (inclusive), 0.51 s does not",
			unitClaims(unit("200", "Alice", "AlliedMCV", "possible", "select|1:00.50|200", "select|0:59.50|200", "select|1:00.51|200")),
			[]string{"evidence.not_in_replay|Contradiction|unitClaims[0].evidence[2]"}},
		{"a parameter that differs is not the operation",
			unitClaims(unit("100", "Alice", "AlliedConstructionYard", "possible", "build|0:05|AlliedBarracks|100", "place|0:07|AlliedPowerPlant|100|1204.5,881,12")),
			[]string{"evidence.not_in_replay|Contradiction|unitClaims[0].evidence[0]", "evidence.not_in_replay|Contradiction|unitClaims[0].evidence[1]"}},
		{"out of range only past the end plus the tolerance",
			`{"eventClaims":[{"claim":"x","evidenceLevel":"possible","evidence":["sell|10:00.50|502","sell|10:00.51|502"]}]}`,
			[]string{"evidence.not_in_replay|Contradiction|eventClaims[0].evidence[0]", "evidence.out_of_range|Contradiction|eventClaims[0].evidence[1]"}},
		{"a power the unit never used is power.not_used, not also not_in_replay",
			unitClaims(unit("200", "Alice", "AlliedMCV", "possible", "power|1:30|SpecialPower_PackReplaceSelf|200")),
			[]string{"power.not_used|Contradiction|unitClaims[0].evidence[0]"}},
		{"a power the unit used, at another time, is not in the replay",
			unitClaims(unit("200", "Alice", "AlliedMCV", "possible", "power|2:10|SpecialPower_UnpackReplaceSelf|200")),
			[]string{"evidence.not_in_replay|Contradiction|unitClaims[0].evidence[0]"}},
		{"out of range comes first for a power never used",
			unitClaims(unit("200", "Alice", "AlliedMCV", "possible", "power|30:00|SpecialPower_PackReplaceSelf|200")),
			[]string{"evidence.out_of_range|Contradiction|unitClaims[0].evidence[0]"}},
		{"a false citation is false in a ruled-out claim too",
			unitClaims(unit("200", "Alice", "AlliedFighterAircraft", "ruled out", "select|1:05|200")),
			[]string{"evidence.not_in_replay|Contradiction|unitClaims[0].evidence[0]"}},
		{"free-text evidence is not checked against the facts",
			unitClaims(unit("200", "Alice", "AlliedMCV", "possible", "1:10 展开")),
			[]string{"evidence.unstructured|Info|unitClaims[0].evidence[0]"}},

		// player.mismatch
		{"a unit on another player's lines",
			unitClaims(unit("200", "Boris", "SovietMCV", "possible", "select|1:00|200")),
			[]string{"player.mismatch|Contradiction|unitClaims[0]"}},
		{"a player who is not in the replay",
			unitClaims(unit("200", "Carol", "AlliedMCV", "possible")),
			[]string{"player.mismatch|Contradiction|unitClaims[0]"}},
		{"player.mismatch applies to ruled-out claims",
			unitClaims(unit("501", "Alice", "AlliedMCV", "ruled out")),
			[]string{"player.mismatch|Contradiction|unitClaims[0]"}},

		// asset.unknown
		{"an asset of another faction",
			unitClaims(unit("300", "Alice", "SovietAirfield", "possible")),
			[]string{"asset.unknown|Warning|unitClaims[0]"}},
		{"a player not in the replay has no scope: asset.unknown does not apply",
			unitClaims(unit("300", "Carol", "SovietAirfield", "possible")),
			[]string{"player.mismatch|Contradiction|unitClaims[0]"}},
		{"without a player the unit's owner's faction judges",
			unitClaims(unit("300", "", "SovietAirfield", "possible")),
			[]string{"asset.unknown|Warning|unitClaims[0]"}},

		// asset.power_mismatch
		{"an aircraft that unpacked, even at possible",
			unitClaims(unit("200", "Alice", "AlliedFighterAircraft", "possible")),
			[]string{"asset.power_mismatch|Contradiction|unitClaims[0]"}},
		{"ruling the aircraft out is supported, not contradicted",
			unitClaims(unit("200", "Alice", "AlliedFighterAircraft", "ruled out")), nil},
		{"a miner may unpack",
			unitClaims(unit("200", "Alice", "AlliedMiner", "possible")), nil},
		{"within the player's faction: a Soviet bomber cannot unpack, a Soviet MCV can",
			unitClaims(unit("501", "Boris", "SovietMCV", "possible"), unit("501", "Boris", "SovietBomberAircraft", "possible")),
			[]string{"asset.power_mismatch|Contradiction|unitClaims[1]"}},
		{"a power no asset of the player's faction carries never gives a Contradiction",
			unitClaims(unit("503", "Boris", "SovietBomberAircraft", "possible", "power|4:15|SpecialPower_ShrinkRay|503")), nil},

		// builder.not_observed and evidence.ambiguous
		{"the seed's MCV case: an unpack fits MCV and miner, and the unit never built",
			unitClaims(unit("200", "Alice", "AlliedMCV", "confirmed", "power|1:10|SpecialPower_UnpackReplaceSelf|200")),
			[]string{"builder.not_observed|WeakEvidence|unitClaims[0]", "evidence.ambiguous|WeakEvidence|unitClaims[0]"}},
		{"a miner claim on an unpack is ambiguous but needs no building",
			unitClaims(unit("200", "Alice", "AlliedMiner", "highly likely", "power|1:10|SpecialPower_UnpackReplaceSelf|200")),
			[]string{"evidence.ambiguous|WeakEvidence|unitClaims[0]"}},
		{"evidence about another UnitId identifies nothing about the claimed one",
			unitClaims(unit("200", "Alice", "AlliedMiner", "confirmed", "power|1:30|SpecialPower_PackReplaceSelf|100", "build|0:05|AlliedPowerPlant|100", "power|1:10|SpecialPower_UnpackReplaceSelf|200")),
			[]string{"evidence.ambiguous|WeakEvidence|unitClaims[0]"}},
		{"a false item proves nothing, so it makes nothing ambiguous",
			unitClaims(unit("200", "Alice", "AlliedMiner", "confirmed", "power|2:10|SpecialPower_UnpackReplaceSelf|200")),
			[]string{"evidence.not_in_replay|Contradiction|unitClaims[0].evidence[0]"}},
		{"hedged claims get no WeakEvidence rule",
			unitClaims(unit("200", "Alice", "AlliedMCV", "possible", "power|1:10|SpecialPower_UnpackReplaceSelf|200")), nil},
		{"select and move evidence alone is not ambiguous power evidence",
			unitClaims(unit("201", "Alice", "AlliedMiner", "highly likely", "select|1:00|201", "move|4:30|1,2,3")), nil},
		{"a builder that built is not flagged; a power only one asset carries is not ambiguous",
			unitClaims(unit("100", "Alice", "AlliedConstructionYard", "confirmed", "power|1:30|SpecialPower_PackReplaceSelf|100")), nil},

		// timeline.before_production
		{"operated before the player's first production of the asset",
			unitClaims(unit("310", "Alice", "AlliedBomberAircraft", "highly likely", "select|2:30|310")),
			[]string{"timeline.before_production|Contradiction|unitClaims[0]"}},
		{"first seen at the very time of the first production is not before it",
			unitClaims(unit("311", "Alice", "AlliedBomberAircraft", "highly likely", "select|3:00|311")), nil},
		{"ruled out is what the timeline supports",
			unitClaims(unit("310", "Alice", "AlliedBomberAircraft", "ruled out", "select|2:30|310")), nil},
		{"structures are built, not produced: no production time to compare",
			unitClaims(unit("201", "Alice", "AlliedPowerPlant", "possible", "select|1:00|201")), nil},
		{"an asset the player never produced gives no timeline",
			unitClaims(unit("201", "Alice", "AlliedAntiAirVehicleTech1", "possible", "select|1:00|201")), nil},
		{"only the claim's player's productions count",
			unitClaims(unit("310", "Boris", "AlliedBomberAircraft", "possible", "select|2:30|310")),
			[]string{"player.mismatch|Contradiction|unitClaims[0]", "asset.unknown|Warning|unitClaims[0]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := keys(env.checker.Check(answer(c.claims), env.input), interceptors.Info)
			want := slices.Clone(c.want)
			if want == nil {
				want = []string{}
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("issues\n got  %v\n want %v", got, want)
			}
		})
	}
}

// TestNoFacts: a log where no rule matches (prose, binary garbage) gives no facts;
// the fact rules do not fire, the format rules still do.
func TestNoFacts(t *testing.T) {
	t.Parallel()
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(i*7919 + i>>3)
	}
	claims := answer(`{"unitClaims":[` + unit("9999", "Nobody", "AlliedMCV", "confirmed") + `,` +
		unit("200", "Alice", "AlliedMCV", "confirmed", "power|99:00|SpecialPower_UnpackReplaceSelf|200", "1:10 展开") + `]}`)
	for _, tc := range []struct{ name, facts string }{
		{"binary garbage", string(garbage)},
		{"prose", "这是一段没有操作记录的文字。\nPlayerA 打得很好 {真的}\n"},
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t, Config{}, tc.facts)
			if env.input.Index.HasFacts() {
				t.Fatalf("%d operations from %s", env.input.Index.Len(), tc.name)
			}
			got := keys(env.checker.Check(claims, env.input), interceptors.Info)
			want := []string{"claim.no_evidence|WeakEvidence|unitClaims[0]", "evidence.unstructured|Info|unitClaims[1].evidence[1]"}
			if !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			got = keys(env.checker.Check("没有声明。", env.input), interceptors.Info)
			if want := []string{"claims.missing|Fatal|"}; !slices.Equal(got, want) {
				t.Fatalf("no block: got %v, want %v", got, want)
			}
		})
	}
}

// TestPartialSessionFacts: facts that may be partial — segments gone from every
// tier, or a session whose list of segments could not be read — turn the fact
// rules off and say why in a Warning, instead of judging a citation of the part
// not here "not in the replay".
func TestPartialSessionFacts(t *testing.T) {
	t.Parallel()
	env := newEnv(t, Config{}, testLog)
	cites := answer(unitClaims(unit("200", "Alice", "AlliedMCV", "possible", "power|9:10.00|SpecialPower_UnpackReplaceSelf|200")))
	if got := keys(env.checker.Check(cites, env.input), interceptors.Warning); !slices.Contains(got, "evidence.not_in_replay|Contradiction|unitClaims[0].evidence[0]") {
		t.Fatalf("fixture: the citation is not contradicted by the whole facts: %v", got)
	}
	for _, tc := range []struct {
		name string
		edit func(in *Input)
		want []string
	}{
		{"segments gone", func(in *Input) { in.MissingSegments = 2 }, []string{"facts.segments_missing|Warning|"}},
		{"session unconfirmed", func(in *Input) { in.SessionUnconfirmed = true }, []string{"facts.session_unconfirmed|Warning|"}},
		{"both", func(in *Input) { in.MissingSegments, in.SessionUnconfirmed = 1, true },
			[]string{"facts.segments_missing|Warning|", "facts.session_unconfirmed|Warning|"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := env.input
			tc.edit(&in)
			issues := env.checker.Check(cites, in)
			if got := keys(issues, interceptors.Warning); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for _, is := range issues {
				if is.Message == "" || is.Recommendation.Text == "" {
					t.Errorf("%s has no text: %+v", is.Code, is)
				}
			}
		})
	}
}

// TestWithoutKnowledge: no set, or a player without a faction, turns the rules
// judged within a faction off; the fact rules still apply.
func TestWithoutKnowledge(t *testing.T) {
	t.Parallel()
	env := newEnv(t, Config{}, testLog)
	claims := answer(unitClaims(
		unit("200", "Alice", "AlliedFighterAircraft", "confirmed", "power|1:10|SpecialPower_UnpackReplaceSelf|200"),
		unit("300", "Alice", "SovietAirfield", "possible", "select|9:00|300"),
	))
	noSet := env.input
	noSet.Set = nil
	noPlayers := env.input
	noPlayers.Players = nil
	oneFaction := noPlayers
	oneFaction.Scopes = knowledge.Scopes{"factions": {"盟军"}}
	for _, tc := range []struct {
		name string
		in   Input
		want []string
	}{
		{"no knowledge set", noSet, []string{"evidence.not_in_replay|Contradiction|unitClaims[1].evidence[0]"}},
		{"players without factions", noPlayers, []string{"evidence.not_in_replay|Contradiction|unitClaims[1].evidence[0]"}},
		{"one faction in the scopes is every player's", oneFaction, []string{
			"asset.power_mismatch|Contradiction|unitClaims[0]",
			"asset.unknown|Warning|unitClaims[1]",
			"evidence.not_in_replay|Contradiction|unitClaims[1].evidence[0]",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := keys(env.checker.Check(claims, tc.in), interceptors.Info)
			slices.Sort(tc.want)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTolerance(t *testing.T) {
	t.Parallel()
	claims := answer(unitClaims(unit("200", "Alice", "AlliedMCV", "possible", "select|1:00.30|200", "select|1:01.50|200")))
	for _, tc := range []struct {
		name      string
		tolerance time.Duration
		want      []string
	}{
		{"exact times only", 0, []string{"evidence.not_in_replay|Contradiction|unitClaims[0].evidence[0]", "evidence.not_in_replay|Contradiction|unitClaims[0].evidence[1]"}},
		{"default half a second", DefaultTimeTolerance, []string{"evidence.not_in_replay|Contradiction|unitClaims[0].evidence[1]"}},
		{"a second and a half", 1500 * time.Millisecond, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := units.Duration(tc.tolerance)
			env := newEnv(t, Config{TimeTolerance: &d}, testLog)
			if got := keys(env.checker.Check(claims, env.input), interceptors.Info); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRequireClaims(t *testing.T) {
	t.Parallel()
	no, yes := false, true
	for _, tc := range []struct {
		name  string
		cfg   *bool
		input *bool
		want  interceptors.Severity
	}{
		{"default requires claims", nil, nil, interceptors.Fatal},
		{"route makes them optional", &no, nil, interceptors.Warning},
		{"the request overrides the route", &no, &yes, interceptors.Fatal},
		{"the request makes them optional", nil, &no, interceptors.Warning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t, Config{RequireClaims: tc.cfg}, testLog)
			in := env.input
			in.RequireClaims = tc.input
			issues := env.checker.Check("只有正文。", in)
			if len(issues) != 1 || issues[0].Code != "claims.missing" || issues[0].Severity != tc.want {
				t.Fatalf("got %+v, want one claims.missing at %s", issues, tc.want)
			}
		})
	}
}

// TestIssueContents checks what the revision request and the client see: the
// message and recommendation in the pack's language, the recommended level and
// alternatives, the arguments, and bounded related facts.
func TestIssueContents(t *testing.T) {
	t.Parallel()
	env := newEnv(t, Config{}, testLog)
	issues := env.checker.Check(answer(unitClaims(
		unit("200", "Alice", "AlliedMCV", "confirmed", "power|1:10|SpecialPower_UnpackReplaceSelf|200"),
		unit("200", "Alice", "AlliedFighterAircraft", "possible"),
		unit("310", "Alice", "AlliedBomberAircraft", "highly likely", "select|2:30|310"),
		unit("9999", "Alice", "AlliedMiner", "possible"),
		unit("200", "Alice", "SovietWarFactory", "possible"),
	)), env.input)
	byKey := map[string]interceptors.Issue{}
	for _, is := range issues {
		byKey[is.Code+"@"+is.Path] = is
	}
	amb := byKey["evidence.ambiguous@unitClaims[0]"]
	if amb.Recommendation.EvidenceLevel != "possible" || !slices.Equal(amb.Recommendation.Alternatives, []string{"AlliedMiner"}) {
		t.Errorf("ambiguous recommendation %+v, want possible with AlliedMiner", amb.Recommendation)
	}
	if !strings.Contains(amb.Message, "UnitId 200") || !strings.Contains(amb.Recommendation.Text, "AlliedMiner") {
		t.Errorf("ambiguous texts: %q / %q", amb.Message, amb.Recommendation.Text)
	}
	pm := byKey["asset.power_mismatch@unitClaims[1]"]
	if pm.Recommendation.EvidenceLevel != "ruled out" || !slices.Contains(pm.Recommendation.Alternatives, "AlliedMCV") {
		t.Errorf("power mismatch recommendation %+v", pm.Recommendation)
	}
	if pm.Args["power"] != "SpecialPower_UnpackReplaceSelf" || !strings.Contains(pm.Message, "AlliedFighterAircraft") {
		t.Errorf("power mismatch args %v, message %q", pm.Args, pm.Message)
	}
	// No edit makes a claim about a UnitId the facts never show, or an asset the
	// knowledge does not know, honest: both recommend removing the claim.
	for _, k := range []string{"unit.not_observed@unitClaims[3]", "asset.unknown@unitClaims[4]"} {
		if rec := byKey[k].Recommendation; !rec.Remove || rec.EvidenceLevel != "" || len(rec.Alternatives) > 0 {
			t.Errorf("%s recommendation %+v, want remove only", k, rec)
		}
	}
	bp := byKey["timeline.before_production@unitClaims[2]"]
	if bp.Args["time"] != "2:30.00" || bp.Args["produced"] != "3:00.00" {
		t.Errorf("before production args %v", bp.Args)
	}
	var lines []string
	for _, f := range bp.Facts {
		lines = append(lines, f.Text)
	}
	if !slices.Contains(lines, "2:30.00 Alice 选择 [UnitId]310") || !slices.Contains(lines, "3:00.00 Alice 生产单位 AlliedBomberAircraft [UnitId]300(生产者)") {
		t.Errorf("before production facts lack the first sighting or the first production: %q", lines)
	}
	for _, is := range issues {
		if is.Message == "" || is.Recommendation.Text == "" {
			t.Errorf("%s %s has no message or recommendation text", is.Code, is.Path)
		}
		if strings.Contains(is.Message, is.Code) || strings.Contains(is.Message, "unitClaims") || strings.Contains(is.Message, "<no value>") {
			t.Errorf("%s message shows a code, a path or a placeholder: %q", is.Code, is.Message)
		}
		if is.Validator != ValidatorName {
			t.Errorf("%s validator %q", is.Code, is.Validator)
		}
	}
}

// TestEnglishFallback: a pack without message templates gets English texts.
func TestEnglishFallback(t *testing.T) {
	t.Parallel()
	pack := *ra3Pack(t)
	pack.Messages = nil
	c, err := NewChecker(&pack, Config{})
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, Config{}, testLog)
	issues := c.Check(answer(unitClaims(unit("200", "Alice", "AlliedMCV", "confirmed", "power|1:10|SpecialPower_UnpackReplaceSelf|200"))), env.input)
	if len(issues) != 2 {
		t.Fatalf("got %d issues", len(issues))
	}
	for _, is := range issues {
		if !strings.Contains(is.Message, "UnitId 200") || strings.ContainsAny(is.Message, "的是") || is.Recommendation.Text == "" {
			t.Errorf("%s: want an English message about UnitId 200, got %q / %q", is.Code, is.Message, is.Recommendation.Text)
		}
	}
	if got := issues[0].Recommendation.Text; !strings.Contains(got, "possible") {
		t.Errorf("builder recommendation %q", got)
	}
}

// TestRelatedFactsAreBounded: an issue about a busy unit carries at most
// max_facts_per_issue lines.
func TestRelatedFactsAreBounded(t *testing.T) {
	t.Parallel()
	large := replayText(t, "allied_vs_soviet.large.txt")
	for _, max := range []int{0, 3} {
		env := newEnv(t, Config{MaxFactsPerIssue: max}, large)
		// 320 produces dozens of units over the game.
		issues := env.checker.Check(answer(unitClaims(unit("320", "PlayerA", "SovietWarFactory", "highly likely", "produce|1:15.00|AlliedAntiInfantryVehicle|320"))), env.input)
		if len(issues) != 1 || issues[0].Code != CodeAssetUnknown {
			t.Fatalf("max %d: issues %v", max, keys(issues, interceptors.Info))
		}
		limit := env.checker.Settings().MaxFactsPerIssue
		if n := len(issues[0].Facts); n == 0 || n > limit {
			t.Fatalf("max %d: %d facts, want 1..%d", max, n, limit)
		}
	}
}

// TestOrder: issues come in claim order — root, unitClaims (array, then each
// claim before its evidence), eventClaims, timelineClaims — then by code.
func TestOrder(t *testing.T) {
	t.Parallel()
	env := newEnv(t, Config{}, testLog)
	var items []string
	for i := 0; i < 12; i++ {
		items = append(items, unitWith("9999", "Alice", "AlliedMCV", "possible", `[]`, "select|9:00|9999"))
	}
	claims := answer(`{"timelineClaims":[{"claim":"t","evidenceLevel":"confirmed"}],"eventClaims":[{"event":"e","evidenceLevel":"possible","evidence":["sell|50:00|1"]}],"unitClaims":[` + strings.Join(items, ",") + `]}`)
	var got []string
	for _, is := range env.checker.Check(claims, env.input) {
		got = append(got, is.Code+"@"+is.Path)
	}
	want := []string{"claims.truncated@unitClaims"}
	for i := 0; i < 10; i++ {
		p := "unitClaims[" + string(rune('0'+i)) + "]"
		want = append(want, "claim.no_alternatives@"+p, "unit.not_observed@"+p, "evidence.not_in_replay@"+p+".evidence[0]")
	}
	want = append(want, "claims.field_alias@eventClaims[0]", "evidence.out_of_range@eventClaims[0].evidence[0]", "claim.no_evidence@timelineClaims[0]")
	if !slices.Equal(got, want) {
		t.Fatalf("order\n got  %v\n want %v", got, want)
	}
}

// TestConcurrentChecksAgree: one Checker serves concurrent requests with the same
// results (run with -race).
func TestConcurrentChecksAgree(t *testing.T) {
	t.Parallel()
	off := newOffline(t, Config{})
	cases := loadCases(t)
	want := make([][]string, len(cases))
	for i, c := range cases {
		rep, err := off.Check(CheckRequest{Facts: c.segments(t), Answer: c.Answer})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = keys(rep.Issues, interceptors.Info)
	}
	done := make(chan string, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i, c := range cases {
				rep, err := off.Check(CheckRequest{Facts: c.segments(t), Answer: c.Answer})
				if err != nil {
					done <- err.Error()
					return
				}
				if got := keys(rep.Issues, interceptors.Info); !slices.Equal(got, want[i]) {
					done <- c.ID + ": " + strings.Join(got, " ")
					return
				}
			}
			done <- ""
		}()
	}
	for g := 0; g < 8; g++ {
		if msg := <-done; msg != "" {
			t.Fatal(msg)
		}
	}
}

// The run's memory of the scopes it looked up answers as the set does, whatever
// the order the claims' factions come in (three factions for two slots).
func TestRunViewAsSet(t *testing.T) {
	t.Parallel()
	env := newEnv(t, Config{}, testLog)
	set := env.input.Set
	r := newRun(env.checker, env.input)
	factions := set.ScopeValues(env.checker.dim)
	if len(factions) < 3 {
		t.Fatalf("want three factions in the set, got %v", factions)
	}
	asked := append([]string{"", "no such faction"}, factions...)
	for i := range 50 {
		scope := asked[(i*7+i/3)%len(asked)]
		got := r.view(scope)
		want := scope != "" && set.HasScope(env.checker.dim, scope)
		if got.Exists() != want || got != set.View(env.checker.dim, scope) && want {
			t.Fatalf("view(%q) exists %v, want %v (or another scope's view)", scope, got.Exists(), want)
		}
		for _, e := range set.ScopeEntries(env.checker.dim, scope) {
			if en := got.Entry(e.ID); en == nil || en.ID != e.ID || !set.Has(env.checker.dim, scope, e.ID) {
				t.Fatalf("view(%q).Entry(%q) = %v", scope, e.ID, en)
			}
		}
	}
}

// TestNotInReplaySaysWhatTheFactsHave: evidence.not_in_replay carries, in its
// actual argument and its message, what the facts have instead of the citation
// (the same operation at another time, another at that time, the unit's of that
// kind), and nothing when they have nothing of the kind.
func TestNotInReplaySaysWhatTheFactsHave(t *testing.T) {
	t.Parallel()
	env := newEnv(t, Config{}, testLog)
	for _, tc := range []struct {
		evidence, actual string
	}{
		{"produce|0:36.50|AlliedFighterAircraft|300", "0:30.00 Alice 生产单位 AlliedFighterAircraft [UnitId]300(生产者)"},
		{"build|0:05.00|AlliedPowerPlant|101", "0:05.00 Alice 开始建造建筑 AlliedPowerPlant [UnitId]100(建造者)"},
		{"power|1:40.00|SpecialPower_ChronoSwap|100", ""}, // power.not_used speaks
		{"sell|9:00.00|999", ""},
	} {
		issues := env.checker.Check(answer(unitClaims(unit("100", "Alice", "AlliedConstructionYard", "possible", tc.evidence))), env.input)
		var got *interceptors.Issue
		for i := range issues {
			if issues[i].Code == CodeNotInReplay {
				got = &issues[i]
			}
		}
		if tc.actual == "" {
			if got != nil && got.Args["actual"] != "" {
				t.Errorf("%s: actual %q, want none", tc.evidence, got.Args["actual"])
			}
			continue
		}
		if got == nil || got.Args["actual"] != tc.actual || !strings.Contains(got.Message, tc.actual) {
			t.Errorf("%s: %+v, want actual %q in the args and the message", tc.evidence, got, tc.actual)
		}
	}
}
