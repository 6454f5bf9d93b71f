package mockupstream

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// analystLog is a short operation log in OPLOG.md's format.
const analystLog = `Mod: default
地图: map_mp_2_rao1
玩家: PlayerA (盟军); PlayerB (苏联)
录像时长: 10:00.00
[操作记录]
0:02.10 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)
0:03.00 PlayerB 开始建造建筑 SovietPowerPlant [UnitId]250(建造者)
0:09.50 PlayerA 放置建筑 AlliedPowerPlant [UnitId]246(建造者) @ (1204.5,880.0,12.0)
0:30.00 PlayerB 生产单位 SovietAntiInfantryInfantry [UnitId]330(生产者)
0:35.00 PlayerA 生产单位 AlliedAntiInfantryInfantry [UnitId]310(生产者)
0:46.71 PlayerB 选择 [UnitId]1400 [UnitId]1401
1:06.39 PlayerA 选择 [UnitId]900
1:24.00 PlayerA 使用 SpecialPower_PackReplaceSelf [UnitId]246
1:30.10 PlayerA 选择 [UnitId]587
1:41.00 PlayerA 使用 SpecialPower_UnpackReplaceSelf [UnitId]587
5:30.00 PlayerA 生产单位 AlliedFighterAircraft [UnitId]655(生产者)
6:02.00 PlayerA 选择 [UnitId]733
9:10.00 PlayerA 生产单位 AlliedBomberAircraft [UnitId]655(生产者)
9:50.00 PlayerB 出售 [UnitId]330
`

func analysisRequest(caseLine string, n int) Request {
	return Request{Model: "m", N: n, Messages: []Message{
		{Role: "system", Text: "你是录像分析助手。"},
		{Role: "user", Text: "分析这局录像。" + caseLine + "\n\n" + analystLog},
	}}
}

// claimsOf returns the claims block of an answer.
func claimsOf(t *testing.T, content string) gjson.Result {
	t.Helper()
	js := claimsJSON(content)
	if !gjson.Valid(js) {
		t.Fatalf("no valid claims block in:\n%s", content)
	}
	return gjson.Parse(js)
}

func TestAnalystIsDeterministicBySeed(t *testing.T) {
	t.Parallel()
	a := &Analyst{Seed: 7, ErrorRate: 0.35, FixRate: 0.5}
	first := a.Answer(analysisRequest("#case 1", 1)).Content
	if again := (&Analyst{Seed: 7, ErrorRate: 0.35, FixRate: 0.5}).Answer(analysisRequest("#case 1", 1)).Content; again != first {
		t.Errorf("the same seed and request gave two answers:\n%s\n---\n%s", first, again)
	}
	differ := 0
	for _, other := range []string{"#case 2", "#case 3", "#case 4"} {
		if a.Answer(analysisRequest(other, 1)).Content != first {
			differ++
		}
	}
	if differ == 0 {
		t.Error("every case got the same answer")
	}
	b := claimsOf(t, first)
	units, events, timeline := len(b.Get("unitClaims").Array()), len(b.Get("eventClaims").Array()), len(b.Get("timelineClaims").Array())
	if units < 4 || units > 7 || events < 1 || events > 3 || timeline < 1 || timeline > 2 {
		t.Errorf("claims: %d unit, %d event, %d timeline; want 4-7, 1-3, 1-2", units, events, timeline)
	}
	// One sentence of prose per claim.
	prose := first[:strings.Index(first, analystMarker)]
	if n := strings.Count(prose, "\n") - 3; n != units+events+timeline {
		t.Errorf("%d prose lines for %d claims:\n%s", n, units+events+timeline, prose)
	}
}

func TestAnalystErrorsAndFixes(t *testing.T) {
	t.Parallel()
	right := (&Analyst{Seed: 3}).Answer(analysisRequest("#case 9", 1)).Content
	wrong := (&Analyst{Seed: 3, ErrorRate: 1}).Answer(analysisRequest("#case 9", 1)).Content
	rb, wb := claimsOf(t, right), claimsOf(t, wrong)
	for _, field := range []string{"unitClaims", "eventClaims", "timelineClaims"} {
		r, w := rb.Get(field).Array(), wb.Get(field).Array()
		if len(r) != len(w) {
			t.Fatalf("%s: %d true claims, %d wrong ones", field, len(r), len(w))
		}
		for i := range r {
			if r[i].Raw == w[i].Raw {
				t.Errorf("%s[%d] is right at ErrorRate 1: %s", field, i, w[i].Raw)
			}
			if r[i].Get("unitId").Int() != w[i].Get("unitId").Int() && !strings.Contains(analystLog, "[UnitId]"+r[i].Get("unitId").String()) {
				t.Errorf("%s[%d]: the wrong claim is about another unit, and the true one is not in the log", field, i)
			}
		}
	}
	// The revision request names every wrong claim: its unit, or its citation.
	var turn strings.Builder
	wb.Get("unitClaims").ForEach(func(_, c gjson.Result) bool {
		turn.WriteString("UnitId " + c.Get("unitId").String() + " 有问题。\n")
		return true
	})
	for _, field := range []string{"eventClaims", "timelineClaims"} {
		wb.Get(field).ForEach(func(_, c gjson.Result) bool {
			turn.WriteString("判断“" + c.Get("claim").Str + "”没有证据。证据“" + c.Get("evidence.0").Str + "”在回放中找不到。\n")
			return true
		})
	}
	revision := func(fixRate float64, turn string) string {
		req := analysisRequest("#case 9", 1)
		req.Messages = append(req.Messages, Message{Role: "assistant", Text: wrong}, Message{Role: "user", Text: turn})
		return (&Analyst{Seed: 3, ErrorRate: 1, FixRate: fixRate}).Answer(req).Content
	}
	if got := revision(1, turn.String()); got != right {
		t.Errorf("FixRate 1, every claim named: the revision is not the true answer:\n%s\n--- want ---\n%s", got, right)
	}
	if got := revision(0, turn.String()); got != wrong {
		t.Errorf("FixRate 0: the revision changed the answer:\n%s", got)
	}
	if got := revision(1, "请重新分析。"); got != wrong {
		t.Errorf("a revision request that names nothing changed the answer:\n%s", got)
	}
}

func TestAnalystChoicesAndNoLog(t *testing.T) {
	t.Parallel()
	a := &Analyst{Seed: 5, ErrorRate: 0.5}
	ans := a.Answer(analysisRequest("#case 1", 2))
	if len(ans.Choices) != 2 || ans.Choices[0].Content == ans.Choices[1].Content {
		t.Errorf("n=2: %d choices, identical: %v", len(ans.Choices), len(ans.Choices) == 2 && ans.Choices[0].Content == ans.Choices[1].Content)
	}
	plain := a.Answer(Request{N: 1, Messages: []Message{{Role: "user", Text: "你好"}}})
	if strings.Contains(plain.Content, analystMarker) || plain.Content == "" {
		t.Errorf("a request without a log got %q", plain.Content)
	}
}

func TestGenerateRuleThroughTheServer(t *testing.T) {
	t.Parallel()
	bad := &Script{Rules: []Rule{{Name: "both", Generate: (&Analyst{}).Answer, Answer: &Answer{Content: "x"}}}}
	if err := New(Options{}).SetScript(bad); err == nil || !strings.Contains(err.Error(), "generate is set, so answer and answers must not be") {
		t.Fatalf("SetScript = %v, want the conflict named", err)
	}
	srv := startMock(t, &Script{Rules: []Rule{
		{Name: "broken", Match: Match{LastUser: "^broken"}, Generate: func(Request) Answer { return Answer{ChunkSize: -1} }},
		(&Analyst{Seed: 1}).Rule(),
	}}, Options{})
	resp, body := post(t, srv, "/v1/chat/completions", chatBody("m", "broken", false), nil)
	if resp.StatusCode != http.StatusInternalServerError || gjson.GetBytes(body, "error.code").Str != "invalid_generated_answer" {
		t.Errorf("a generated answer that does not compile: %d %s", resp.StatusCode, body)
	}
	user := analysisRequest("#case 1", 1).Messages[1]
	want := (&Analyst{Seed: 1}).Answer(Request{N: 1, Messages: []Message{user}}).Content
	for _, stream := range []bool{false, true} {
		resp, body = post(t, srv, "/v1/chat/completions", chatBody("m", user.Text, stream), nil)
		got := ""
		if stream {
			for _, d := range sseData(t, body) {
				got += gjson.Get(d, "choices.0.delta.content").Str
			}
		} else {
			got = completionContent(t, body)
		}
		if resp.StatusCode != 200 || got != want {
			t.Errorf("stream=%v: the analyst's answer through the server: %d\n%s\n--- want ---\n%s", stream, resp.StatusCode, got, want)
		}
	}
}
