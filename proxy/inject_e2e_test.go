package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// injectConfig has one route that injects knowledge (ra3 pack) without validation
// and one that validates; %MOCK% is the mock's URL, %OVERLAY% an overlay file for
// ra3-corona.
const injectConfig = `
log: {level: debug}
upstreams:
  mock: {base_url: "%MOCK%", read_timeout: 5s}
knowledge:
  overlays: {ra3-corona: "%OVERLAY%"}
routes:
  - name: analyst
    models: [ra3-analyst]
    upstream: mock
    pack: ra3
    inject: {}
  - name: checked
    models: [ra3-checked]
    upstream: mock
    pack: ra3
    inject: {}
    validate: {}
  - name: default
    default: true
    upstream: mock
`

func newInjectHarness(t *testing.T) (*harness, string) {
	t.Helper()
	overlay := filepath.Join(t.TempDir(), "ra3-corona.overlay.json")
	return newHarness(t, `default: {content: "分析完成。"}`, strings.ReplaceAll(injectConfig, "%OVERLAY%", overlay)), overlay
}

func coronaRequest(t *testing.T, model string, extra string) string {
	t.Helper()
	log, err := os.ReadFile(filepath.Join("testdata", "inject", "corona_celestial_vs_allied.txt"))
	if err != nil {
		t.Fatal(err)
	}
	user, _ := json.Marshal("请分析这局录像。\n" + string(log))
	return `{"model":"` + model + `","messages":[{"role":"system","content":"你是录像分析助手。"},{"role":"user","content":` + string(user) + `}]` + extra + `}`
}

// upstreamPrompt is the system prompt of the last request the mock received.
func upstreamPrompt(t testing.TB, h *harness) (string, []byte) {
	t.Helper()
	body := h.lastRequest(t).Body
	msgs := gjson.GetBytes(body, "messages").Array()
	if len(msgs) == 0 || msgs[0].Get("role").Str != "system" {
		t.Fatalf("the upstream request has no leading system message: %.300s", body)
	}
	return msgs[0].Get("content").Str, body
}

var sovietEntry = regexp.MustCompile(`(?m)^### Soviet`)

func TestInjectedKnowledgeFollowsTheReplay(t *testing.T) {
	t.Parallel()
	h, _ := newInjectHarness(t)
	status, _, resp := h.post(t, "/v1/chat/completions", coronaRequest(t, "ra3-analyst", `,"metadata":{"factgate.session":"s-1","app":"replay-reader"},"top_p":0.5`))
	if status != 200 || gjson.GetBytes(resp, "choices.0.message.content").Str != "分析完成。" {
		t.Fatalf("%d %s", status, resp)
	}
	prompt, body := upstreamPrompt(t, h)
	for _, want := range []string{"# 红色警戒 3 日冕（Corona）模组游戏知识", "## 阵营：神州", "### CelestialMCV：", "## 阵营：盟军", "### AlliedMCV：", "## 地图：map_mp_2_feasel1", "## 应用的补充要求\n\n你是录像分析助手。"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the upstream's system prompt lacks %q", want)
		}
	}
	if strings.Contains(prompt, "## 阵营：苏联") || sovietEntry.MatchString(prompt) {
		t.Error("Soviet knowledge was injected for a 神州 vs 盟军 replay")
	}
	if strings.Index(prompt, "## 阵营：神州") > strings.Index(prompt, "## 阵营：盟军") {
		t.Error("factions are not in player order (神州 first)")
	}
	if strings.Contains(prompt, "[机器可读声明]") {
		t.Error("the claims contract was injected on a route that does not validate")
	}
	if n := len(gjson.GetBytes(body, "messages").Array()); n != 2 {
		t.Errorf("the upstream got %d messages, want the system prompt and the user's", n)
	}
	if md := gjson.GetBytes(body, "metadata"); md.Raw != `{"app":"replay-reader"}` || gjson.GetBytes(body, "top_p").Raw != "0.5" {
		t.Errorf("metadata %s top_p %s: factgate keys must go, the rest stay", md.Raw, gjson.GetBytes(body, "top_p").Raw)
	}
}

func TestClientHeadersSelectTheKnowledge(t *testing.T) {
	t.Parallel()
	h, _ := newInjectHarness(t)
	// The header overrides the replay's factions: only 苏联 (percent-encoded).
	status, _, resp := h.post(t, "/v1/chat/completions", coronaRequest(t, "ra3-analyst", ""),
		"X-Factgate-Knowledge-Set", "ra3", "x-factgate-scope-factions", "%E8%8B%8F%E8%81%94")
	if status != 200 {
		t.Fatalf("%d %s", status, resp)
	}
	prompt, _ := upstreamPrompt(t, h)
	if !strings.HasPrefix(prompt, "# 红色警戒 3 游戏知识") || !strings.Contains(prompt, "## 阵营：苏联") || strings.Contains(prompt, "## 阵营：神州") || strings.Contains(prompt, "## 阵营：盟军") {
		t.Fatalf("headers did not select set ra3 with 苏联 only:\n%.400s", prompt)
	}
	if up := h.lastRequest(t).Header; up.Get("X-Factgate-Knowledge-Set") != "" || up.Get("X-Factgate-Scope-Factions") != "" {
		t.Fatalf("factgate's own headers reached the upstream: %v", up)
	}
}

func TestUnknownKnowledgeSetHeaderIs400(t *testing.T) {
	t.Parallel()
	h, _ := newInjectHarness(t)
	status, hdr, resp := h.post(t, "/v1/chat/completions", coronaRequest(t, "ra3-analyst", ""), "X-Factgate-Knowledge-Set", "ra3-uprising")
	e := gjson.GetBytes(resp, "error")
	if status != 400 || e.Get("type").Str != "invalid_request_error" || e.Get("code").Str != "unknown_knowledge_set" ||
		e.Get("param").Str != "X-Factgate-Knowledge-Set" || !strings.Contains(e.Get("message").Str, "ra3, ra3-corona") {
		t.Fatalf("%d %s", status, resp)
	}
	if !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Errorf("content type %q", hdr.Get("Content-Type"))
	}
	if n := len(h.mock.Requests()); n != 0 {
		t.Fatalf("the upstream was called %d times for a rejected request", n)
	}
}

func TestContractIsInjectedOnAValidatingRoute(t *testing.T) {
	t.Parallel()
	h, _ := newInjectHarness(t)
	_, _, _ = h.post(t, "/v1/chat/completions", coronaRequest(t, "ra3-checked", ""))
	recs := h.mock.Requests()
	if len(recs) == 0 {
		t.Fatal("the upstream received nothing")
	}
	// The first upstream call is the draft, with the injected prompt.
	prompt := gjson.GetBytes(recs[0].Body, "messages.0.content").Str
	if !strings.Contains(prompt, "[机器可读声明]") || !strings.Contains(prompt, "## 阵营：神州") {
		t.Fatalf("the draft request lacks the contract or the knowledge:\n%.300s", prompt)
	}
	if strings.Index(prompt, "[机器可读声明]") < strings.Index(prompt, "## 地图：map_mp_2_feasel1") {
		t.Fatal("the contract comes before the knowledge")
	}
}

func TestOverlayEditReachesTheNextRequestWithoutRestart(t *testing.T) {
	t.Parallel()
	h, overlay := newInjectHarness(t)
	if status, _, resp := h.post(t, "/v1/chat/completions", coronaRequest(t, "ra3-analyst", "")); status != 200 {
		t.Fatalf("%d %s", status, resp)
	}
	const fact = "专家修正：青龙战斗核心舰在本模组中可以在水面展开。"
	if prompt, _ := upstreamPrompt(t, h); strings.Contains(prompt, fact) {
		t.Fatal("the corrected fact is there before the overlay was written")
	}
	// A domain expert corrects one unit fact.
	edit := `{"factions": {"神州": {"entries": [{"id": "CelestialMCV", "tags": ["vehicle", "builder"], "text": "### CelestialMCV：青龙战斗核心舰\n- ` + fact + `"}]}}}`
	if err := os.WriteFile(overlay, []byte(edit), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if status, _, resp := h.post(t, "/v1/chat/completions", coronaRequest(t, "ra3-analyst", "")); status != 200 {
			t.Fatalf("%d %s", status, resp)
		}
		prompt, _ := upstreamPrompt(t, h)
		if strings.Contains(prompt, fact) {
			if strings.Count(prompt, "### CelestialMCV：") != 1 {
				t.Fatal("the overlay entry was added beside the built-in one instead of replacing it")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the corrected fact did not reach the upstream within 5s; /readyz: %s", injectReadyz(h))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// injectReadyz returns the proxy's readiness report.
func injectReadyz(h *harness) string {
	resp, err := http.Get(h.base + "/readyz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
