package knowledge

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// chunkedHeads serve texts as a caller decoding on demand would: a head ends
// extra bytes past the line break asked for (mid-line, even mid-character), so
// that the line scan must ask again for a line it has only part of.
type chunkedHeads struct {
	texts []string
	extra int
	calls int
}

func (h *chunkedHeads) Count() int { return len(h.texts) }

func (h *chunkedHeads) Head(i, lines int) (string, bool) {
	h.calls++
	text, end := h.texts[i], 0
	for n := 0; n < lines; n++ {
		j := strings.IndexByte(text[end:], '\n')
		if j < 0 {
			return text, false
		}
		end += j + 1
	}
	end = min(end+h.extra, len(text))
	return text[:end], end < len(text)
}

// headerLines are the lines the random texts are made of: every rule's match and
// near-miss, operations, blank lines, a mark, separators that are not \n.
var headerLines = []string{
	"Mod: default", "Mod: corona", "Mod：Corona", " Mod : CORONA ", "Mod:", "mod: corona",
	"地图: map_mp_2_rao1", "  地图：tsunami", "地图:", "地图: a b",
	"玩家: PlayerA (盟军); PlayerB (苏联)", "玩家：Alice（旭日帝国）, Bob (盟军)", "玩家: nobody", "玩家:",
	"0:02.10 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)",
	"12:59.99 PlayerB 出售 [UnitId]250", "0:09.50 PlayerA 放置建筑 AlliedPowerPlant [UnitId]246 @ (1.0,2.0,3.0)",
	"[操作记录]", "录像时长: 14:32.40", "", "\r", " ", "\t地图: tab",
	"DM: Roll initiative.", "Maya (Seren): I cast fire bolt.", "Q: why?", "hello", "HELLO",
	"zone = dark", "zone=Light", "zone =", "lvl: 3", "\uFEFFMod: default", "a\u2028Mod: corona",
	"\"quoted\" \\ backslash", strings.Repeat("a", 70), strings.Repeat("玩", 30),
}

// randomTexts builds one to three texts of header-like lines, joined by \n or
// \r\n, some with a byte-order mark or without a final line break.
func randomTexts(rng *rand.Rand) []string {
	texts := make([]string, 1+rng.IntN(3))
	for i := range texts {
		var b strings.Builder
		if rng.IntN(8) == 0 {
			b.WriteString("\uFEFF")
		}
		for n := rng.IntN(12); n > 0; n-- {
			b.WriteString(headerLines[rng.IntN(len(headerLines))])
			if rng.IntN(4) == 0 {
				b.WriteString("\r\n")
			} else {
				b.WriteString("\n")
			}
		}
		if rng.IntN(3) == 0 {
			b.WriteString(headerLines[rng.IntN(len(headerLines))])
		}
		texts[i] = b.String()
	}
	return texts
}

// testPacks are the packs the differential tests run: the built-in ones, the
// same with bounds a few lines and bytes long (so a line straddles them), and a
// pack built in Go whose rules are unanchored (no prefilter) and whose apply
// rule matches a blank line.
func testPacks(t testing.TB) map[string]*Pack {
	t.Helper()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	packs := map[string]*Pack{}
	for _, name := range []string{"ra3", "dnd"} {
		p := reg.Pack(name)
		packs[name] = p
		small := *p
		small.Context.MaxLines, small.Context.MaxBytes = 3, 40
		packs[name+"-small"] = &small
	}
	packs["unanchored"] = unanchoredPack()
	return packs
}

func unanchoredPack() *Pack {
	set := &ValueRule{Re: regexp.MustCompile(`(?i)mod\s*[:：]\s*(?P<value>\S+)`),
		Map: map[string]string{"corona": "ra3-corona"}, Default: "ra3", memo: newLineMemo[valueVerdict]()}
	players := &PlayersRule{Re: regexp.MustCompile(`玩家\s*[:：]\s*(?P<value>.*)`),
		ItemRe:    regexp.MustCompile(`(?P<name>[^\s;；,，()（）]+)\s*[(（]\s*(?P<scope>[^()（）]+?)\s*[)）]`),
		Dimension: "factions", Map: map[string]string{"旭日帝国": "帝国"}, memo: newLineMemo[playersVerdict]()}
	zone := ValueRule{Re: regexp.MustCompile(`zone\s*=\s*(?P<value>.*)`), Map: map[string]string{"dark": "Darkness"},
		Default: "light", memo: newLineMemo[valueVerdict]()}
	maps := ValueRule{Re: regexp.MustCompile(`地图\s*[:：]\s*(?P<value>\S+)`)} // no memo: as a Pack built in Go
	return &Pack{
		Name: "unanchored",
		Context: ContextRules{KnowledgeSet: set, Players: players,
			Scopes: map[string]ValueRule{"zone": zone, "maps": maps}, MaxLines: 6, MaxBytes: 90},
		ApplyRules: &ApplyRules{UserLine: `^$`, UserLineRe: regexp.MustCompile(`^$`)},
	}
}

// checkAgainstReference fails when the context or apply rules read texts other
// than the reference does, from the whole texts or from heads served in chunks.
func checkAgainstReference(t *testing.T, name string, p *Pack, texts []string) {
	t.Helper()
	want := refExtractContextTexts(p, texts)
	wantApplies := refApplies(p, ApplyInput{UserTexts: texts})
	for round := range 2 { // the second round reads the line memos
		if got := ExtractContextTexts(p, texts); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s, round %d: ExtractContextTexts(%q) = %+v, want %+v", name, round, texts, got, want)
		}
		if got := p.Applies(ApplyInput{UserTexts: texts}); got != wantApplies {
			t.Fatalf("%s, round %d: Applies(%q) = %+v, want %+v", name, round, texts, got, wantApplies)
		}
		for _, extra := range []int{0, 1, 5, 1 << 20} {
			heads := &chunkedHeads{texts: texts, extra: extra}
			if got := ExtractContextHeads(p, heads); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, round %d, heads +%d bytes: ExtractContextHeads(%q) = %+v, want %+v", name, round, extra, texts, got, want)
			}
			if got := p.Applies(ApplyInput{Heads: heads}); got != wantApplies {
				t.Fatalf("%s, round %d, heads +%d bytes: Applies(%q) = %+v, want %+v", name, round, extra, texts, got, wantApplies)
			}
		}
	}
}

func TestContextRulesMatchTheReferenceOnRandomTexts(t *testing.T) {
	t.Parallel()
	packs := testPacks(t)
	rng := rand.New(rand.NewPCG(16, 2026))
	for range 3000 {
		texts := randomTexts(rng)
		for name, p := range packs {
			checkAgainstReference(t, name, p, texts)
		}
	}
}

func TestContextRulesMatchTheReferenceOnTheReplays(t *testing.T) {
	t.Parallel()
	packs := testPacks(t)
	files, err := filepath.Glob("testdata/replays/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no replays: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		log := string(data)
		ops := log[strings.Index(log, "[操作记录]"):]
		for _, texts := range [][]string{{log}, {"请分析。\n" + log}, {"你好", log}, {ops}, {strings.Repeat("x\n", 199) + log}} {
			for name, p := range packs {
				checkAgainstReference(t, name+" "+filepath.Base(f), p, texts)
			}
		}
	}
}

// The scan asks for more of a head only while a rule is pending: the header of
// a log is read from its first lines.
func TestExtractContextReadsOnlyTheLinesItNeeds(t *testing.T) {
	p := ra3Pack(t)
	log := "Mod: corona\n地图: x\n玩家: A (盟军)\n" + strings.Repeat("0:01.00 A 出售 [UnitId]1\n", 500)
	heads := &chunkedHeads{texts: []string{log}}
	ex := ExtractContextHeads(p, heads)
	if !ex.SetMatched || heads.calls != 1 {
		t.Fatalf("extracted %+v with %d calls for heads, want a match from the first call", ex, heads.calls)
	}
}

func TestLineMemoIsBounded(t *testing.T) {
	m := newLineMemo[valueVerdict]()
	for i := range 3 * lineMemoEntries {
		m.put(strings.Repeat("x", i%lineMemoMaxLine)+string(rune('a'+i%26))+itoa(i), valueVerdict{value: "v", matched: true})
	}
	if n := len(m.verdict); n > lineMemoEntries {
		t.Fatalf("the memo holds %d lines, want at most %d", n, lineMemoEntries)
	}
	long := strings.Repeat("y", lineMemoMaxLine+1)
	m.put(long, valueVerdict{matched: true})
	if _, ok := m.get(long); ok {
		t.Fatal("the memo kept a line longer than a header line")
	}
	var none *lineMemo[valueVerdict]
	none.put("a", valueVerdict{})
	if _, ok := none.get("a"); ok {
		t.Fatal("a nil memo remembered a line")
	}
}

// The memo is shared by a route's concurrent requests (run with -race), and a
// verdict's players are copied out: a caller editing its players does not edit
// the next request's.
func TestLineMemoUnderConcurrentRequests(t *testing.T) {
	p := ra3Pack(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 300 {
				texts := randomTexts(rng)
				want := refExtractContextTexts(p, texts)
				got := ExtractContextTexts(p, texts)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("ExtractContextTexts(%q) = %+v, want %+v", texts, got, want)
					return
				}
				for i := range got.Players {
					got.Players[i].Name = "edited"
				}
				if got, want := p.Applies(ApplyInput{UserTexts: texts}), refApplies(p, ApplyInput{UserTexts: texts}); got != want {
					t.Errorf("Applies(%q) = %+v, want %+v", texts, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzContextRules compares the context and apply rules with the reference on
// two texts (split at a NUL) of any content, under every test pack.
func FuzzContextRules(f *testing.F) {
	f.Add("Mod: corona\n地图: x\n玩家: A (盟军)\n0:01.00 A 出售 [UnitId]1\n", uint8(0))
	f.Add("\uFEFFhello\r\n\r\nDM: hi\x00zone = dark\n玩家：Alice（旭日帝国）", uint8(3))
	f.Add(strings.Repeat("x\n", 10)+"Mod: default", uint8(1))
	packs := testPacks(f)
	f.Fuzz(func(t *testing.T, s string, extra uint8) {
		texts := strings.Split(s, "\x00")
		for name, p := range packs {
			checkAgainstReference(t, name, p, texts)
			heads := &chunkedHeads{texts: texts, extra: int(extra)}
			if got, want := ExtractContextHeads(p, heads), refExtractContextTexts(p, texts); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: ExtractContextHeads(%q, +%d) = %+v, want %+v", name, texts, extra, got, want)
			}
		}
	})
}
