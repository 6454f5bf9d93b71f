package reqcontext

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// decodedHeads decodes every user text's head as far as the rules could read,
// asking for 1, 3, 7, ... lines as a line scan would, so that decoding goes on
// from where it stopped; it panics when a head is not an extension of the one
// before, or is not the whole head when asked for every line.
func decodedHeads(body string, bounds headBounds, buf func(n int) []byte) []string {
	h := newUserHeads(body, scanRequest(body, nil, nil).messages, bounds, bufFunc(buf))
	out := make([]string, h.Count())
	for i := range out {
		var head string
		more := true
		for lines := 1; more; lines = 2*lines + 1 {
			next, m := h.Head(i, min(lines, bounds.lines))
			if !strings.HasPrefix(next, head) {
				panic(fmt.Sprintf("head %q after %q", next, head))
			}
			if lines >= bounds.lines && m {
				panic(fmt.Sprintf("head %q of all %d lines says there is more", next, bounds.lines))
			}
			head, more = next, m
		}
		out[i] = head
	}
	return out
}

// rawFragments are pieces of JSON string contents, escapes as a client may send
// them: line breaks as \n, \r\n, \u000a and U+2028, quotes, a byte-order mark
// escaped and not, surrogates paired and lone, and the lines the rules read.
var rawFragments = []string{
	`Mod: corona`, `Mod: default`, `地图: map_mp_2_rao1`, `玩家: PlayerA (盟军); PlayerB (苏联)`, `玩家：Alice（旭日帝国）`,
	`0:02.10 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)`, `[操作记录]`, `DM: Roll initiative.`,
	`\n`, `\n`, `\n`, `\r\n`, `\u000a`, `\u000A`, `\u2028`, "\u2028", `\"`, `\\`, `\/`, `\t`, `\u0020`,
	`\ufeff`, "\uFEFF", `\ud83d\ude00`, `\ud83d`, `\u00e9`, `é`, ` `, `aaaaaaaaaaaaaaaaaaaa`, `Mod\u003a corona`,
}

// randomRawText joins random fragments into the contents of a JSON string.
func randomRawText(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.IntN(40); n > 0; n-- {
		b.WriteString(rawFragments[rng.IntN(len(rawFragments))])
	}
	return b.String()
}

// bodyWithUserTexts builds a chat completion whose user texts have the raw
// contents: the first a string content, the second the text part of an array
// content between other parts, the rest string contents; assistant and system
// messages between them are not user texts.
func bodyWithUserTexts(raws ...string) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","metadata":{"k":"v"},"messages":[{"role":"system","content":"Mod: system"}`)
	for i, raw := range raws {
		if i == 1 {
			b.WriteString(`,{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"` + raw + `"},{"type":"text","text":7}]}`)
		} else {
			b.WriteString(`,{"content":"` + raw + `","role":"user"}`)
		}
		b.WriteString(`,{"role":"assistant","content":"玩家: Z (盟军)"}`)
	}
	b.WriteString(`],"temperature":0.3}`)
	return b.String()
}

// headPacks are the packs the differential tests run: the built-in ones, and
// the same with bounds of a few lines and bytes, so that lines straddle them.
func headPacks(t testing.TB) map[string]*knowledge.Pack {
	t.Helper()
	lib, err := testLib()
	if err != nil {
		t.Fatal(err)
	}
	packs := map[string]*knowledge.Pack{}
	for _, name := range []string{"ra3", "dnd"} {
		p := lib.Registry().Pack(name)
		packs[name] = p
		small := *p
		small.Context.MaxLines, small.Context.MaxBytes = 3, 40
		packs[name+"-small"] = &small
	}
	return packs
}

// checkHeadsAgainstReference fails when the heads decoded on demand differ from
// those decoded up front, or the pack's rules read anything else from them.
func checkHeadsAgainstReference(t *testing.T, name string, p *knowledge.Pack, body string) {
	t.Helper()
	if !rawjson.ValidString(body, 64) {
		t.Fatalf("test body is not JSON: %s", body)
	}
	bounds := boundsOf(p)
	ref := refUserTextHeads(body, bounds, nil)
	if got := decodedHeads(body, bounds, nil); !slices.Equal(got, ref) {
		t.Fatalf("%s: heads of %s\n got %q\nwant %q", name, body, got, ref)
	}
	ex := &interceptors.Exchange{}
	defer ex.Release()
	if got := decodedHeads(body, bounds, ex.Buffer); !slices.Equal(got, ref) {
		t.Fatalf("%s: heads of %s in pooled buffers\n got %q\nwant %q", name, body, got, ref)
	}
	want := knowledge.ExtractContextTexts(p, ref)
	wantApplies := p.Applies(knowledge.ApplyInput{UserTexts: ref})
	heads := newUserHeads(body, scanRequest(body, nil, nil).messages, bounds, ex)
	if got := knowledge.ExtractContextHeads(p, heads); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: context of %s\n got %+v\nwant %+v", name, body, got, want)
	}
	// Applies reads the heads ExtractContextHeads has decoded part of.
	if got := p.Applies(knowledge.ApplyInput{Heads: heads}); got != wantApplies {
		t.Fatalf("%s: applies to %s\n got %+v\nwant %+v", name, body, got, wantApplies)
	}
	if got := judge(p, body, scanRequest(body, nil, nil), bounds, nil); got != wantApplies {
		t.Fatalf("%s: judge(%s)\n got %+v\nwant %+v", name, body, got, wantApplies)
	}
}

func TestUserHeadsMatchTheReferenceOnRandomBodies(t *testing.T) {
	t.Parallel()
	packs := headPacks(t)
	rng := rand.New(rand.NewPCG(16, 27))
	for range 2000 {
		raws := make([]string, 1+rng.IntN(3))
		for i := range raws {
			raws[i] = randomRawText(rng)
		}
		body := bodyWithUserTexts(raws...)
		for name, p := range packs {
			checkHeadsAgainstReference(t, name, p, body)
		}
	}
}

func TestUserHeadsMatchTheReferenceOnTheReplays(t *testing.T) {
	t.Parallel()
	packs := headPacks(t)
	for _, name := range []string{"allied_vs_soviet.txt", "corona_celestial_vs_allied.txt", "mcv_vs_miner.txt", "allied_vs_soviet.large.txt"} {
		log, _ := json.Marshal(replay(t, name))
		raw := string(log[1 : len(log)-1])
		for _, body := range []string{
			bodyWithUserTexts(raw),
			bodyWithUserTexts(`请分析。\n`+raw, raw),
			bodyWithUserTexts(`你好`, `\ufeff`+raw),
			bodyWithUserTexts(strings.Repeat(`x\n`, 199) + raw),
		} {
			for pack, p := range packs {
				checkHeadsAgainstReference(t, pack+" "+name, p, body)
			}
		}
	}
}

// The stage decodes no more of a log than the rules read: the first lines.
func TestUserHeadsDecodeOnlyWhatTheRulesRead(t *testing.T) {
	p := headPacks(t)["ra3"]
	log, _ := json.Marshal(replay(t, "allied_vs_soviet.txt"))
	body := bodyWithUserTexts(string(log[1 : len(log)-1]))
	heads := newUserHeads(body, scanRequest(body, nil, nil).messages, boundsOf(p), nil)
	knowledge.ExtractContextHeads(p, heads)
	p.Applies(knowledge.ApplyInput{Heads: heads})
	if n := heads.texts[0].lines; n == 0 || n > 16 {
		t.Fatalf("decoded %d lines of the log, want the first few", n)
	}
}

// FuzzUserHeadsMatchTheReference compares the heads decoded on demand, and what
// the packs' rules read from them, with the heads decoded up front, on two user
// texts: as raw JSON string contents when they are valid as such (any escape),
// else as encoding/json writes them.
func FuzzUserHeadsMatchTheReference(f *testing.F) {
	f.Add(`Mod: corona\n地图: x\r\n玩家: A (盟军)\u000a0:01.00 A 出售 [UnitId]1\n`, `\ufeffDM: hi\u2028\"q\"`)
	f.Add(strings.Repeat(`x\n`, 5)+`Mod: default`, "玩家：Alice（旭日帝国）\n")
	f.Add(`\ud83d\n\\n\/`, `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\nMod: corona`)
	packs := headPacks(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		raws := []string{asRawText(a), asRawText(b)}
		body := bodyWithUserTexts(raws...)
		for name, p := range packs {
			checkHeadsAgainstReference(t, name, p, body)
		}
	})
}

// asRawText returns s when it is valid JSON string contents, else s encoded.
func asRawText(s string) string {
	if rawjson.ValidString(`"`+s+`"`, 1) {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
