package proxy

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// The semantic validators' end-to-end tests run the D&D route — inject, the answer
// shape, the combat judge and the hidden revision — against the mock upstream with
// a scripted producer and judge.

// Two labelled chunks of the D&D fixtures (d01_goblin_ambush: combat;
// d07_plan_the_raid: narrative).
const (
	ambushChunk = "DM: Roll initiative, everyone.\nMaya (Seren): Seventeen.\nTom (Brakka): Nine.\nDM: Seren, you're up first. The two goblins are thirty feet away behind the wagon.\nMaya (Seren): I cast fire bolt at the closer one. That's a 19 to hit.\nDM: Hits. Roll damage.\nMaya (Seren): Eight fire damage.\nDM: It shrieks and drops. The second goblin looses an arrow at Brakka — 15 against your AC.\nTom (Brakka): My AC is 16, so it misses.\nDM: Brakka, your turn.\nTom (Brakka): I charge him and swing my greataxe. Natural 20!\n"
	raidChunk   = "Tom (Brakka): If we hit the camp at dawn, the guards will be changing shifts.\nMaya (Seren): I can cast sleep on the sentries before they raise an alarm.\nLee (Pell): And if the chieftain wakes up?\nTom (Brakka): Then I fight him and you three get the prisoners out.\nDM: The fire crackles. Nobody at the camp knows you're here yet. Do you rest until dawn?\nSam (Ilya): We rest, but I keep watch.\n"
)

// dndConfig is a D&D route on the mock (and, for %JUDGE%, a second upstream).
// %SEMANTIC% and %REVISE% are the route's blocks.
const dndConfig = `
server:
  # Far above any chain's time: a held stream answers with its headers
  # (X-Factgate-Issues) instead of committing them early on a loaded machine.
  keepalive_interval: 60s
log: {level: warn}
upstreams:
  mock: {base_url: "%MOCK%", read_timeout: 5s}
  judge: {base_url: "%JUDGE%", read_timeout: 5s}
routes:
  - name: scenes
    models: [scene-writer]
    upstream: mock
    upstream_model: deepseek-chat
    pack: dnd
    inject: {}
    validate: {}
    semantic: %SEMANTIC%
    revise: %REVISE%
`

func dndRouteConfig(semantic, revise, judgeURL string) string {
	if revise == "" {
		revise = "{}"
	}
	if judgeURL == "" {
		judgeURL = "http://127.0.0.1:9/v1" // unused unless the semantic block names it
	}
	return strings.NewReplacer("%SEMANTIC%", semantic, "%REVISE%", revise, "%JUDGE%", judgeURL).Replace(dndConfig)
}

// sceneJSON is a scene description answer.
func sceneJSON(kind, title string) string {
	return `{"kind": "` + kind + `", "title": "` + title + `", "summary": "What happens in the chunk, in two sentences."}`
}

// verdict is a judge answer's content.
func verdict(v, explanation string) string {
	b, _ := json.Marshal(map[string]string{"verdict": v, "explanation": explanation})
	return string(b)
}

// judgeRule answers judge requests (strict json_schema) whose proposed kind is
// kind, with answers in order (the last repeats).
func judgeRule(kind string, answers ...answerJSON) map[string]any {
	return map[string]any{
		"name":    "judge-" + kind,
		"match":   map[string]any{"response_format": "json_schema", "last_user": `(?s)## Proposed kind\s+` + regexp.QuoteMeta(kind) + `\s*$`},
		"answers": answers,
	}
}

// revisionRule answers hidden revision requests (they carry an assistant turn).
func revisionRule(answers ...answerJSON) map[string]any {
	return map[string]any{"name": "revision", "match": map[string]any{"has_assistant": true}, "answers": answers}
}

// dndScript answers the draft with draft and the rules' requests per rule.
func dndScript(draft answerJSON, rules ...map[string]any) string {
	b, err := json.Marshal(map[string]any{"rules": rules, "default": draft})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Fixed token counts per kind of call, so the client's usage is hand-computable.
var (
	draftUsage    = map[string]int{"prompt_tokens": 1000, "completion_tokens": 50}
	judgeUsage    = map[string]int{"prompt_tokens": 400, "completion_tokens": 30}
	revisionUsage = map[string]int{"prompt_tokens": 1200, "completion_tokens": 60}
)

// sceneRequest is a D&D app's request for one chunk, with metadata the judge must
// never see.
func sceneRequest(chunk string) string {
	b, _ := json.Marshal(map[string]any{
		"model": "scene-writer",
		"messages": []map[string]string{
			{"role": "system", "content": "You write scene descriptions for our campaign tool."},
			{"role": "user", "content": chunk},
		},
		"metadata": map[string]string{"chunk_id": "d01_goblin_ambush", "source_hash": "sha256:77aa01", "factgate.session": "campaign-7"},
	})
	return string(b)
}

// sceneViaGoOpenAI sends the chunk with go-openai, streamed or not, and returns
// the content, the usage the client saw and the response headers.
func sceneViaGoOpenAI(t *testing.T, h *harness, chunk string, stream bool) clientResult {
	t.Helper()
	return goOpenAIChat(t, h, goopenai.ChatCompletionRequest{Model: "scene-writer", Messages: []goopenai.ChatCompletionMessage{
		{Role: "system", Content: "You write scene descriptions for our campaign tool."},
		{Role: "user", Content: chunk},
	}}, stream)
}

// callKind tells a recorded upstream request apart: "judge" (strict json_schema),
// "revision" (an assistant turn) or "draft".
func callKind(r mockupstream.Recorded) string {
	switch {
	case gjson.GetBytes(r.Body, "response_format.type").Str == "json_schema":
		return "judge"
	case strings.Contains(gjson.GetBytes(r.Body, "messages.#.role").Raw, `"assistant"`):
		return "revision"
	}
	return "draft"
}

// calls returns the recorded chat completions of a mock by kind, in order.
func calls(m *mockupstream.Server) map[string][]mockupstream.Recorded {
	out := map[string][]mockupstream.Recorded{}
	for _, r := range m.Requests() {
		if strings.HasSuffix(r.Path, "/chat/completions") {
			out[callKind(r)] = append(out[callKind(r)], r)
		}
	}
	return out
}

// kinds lists the recorded kinds in order ("draft judge revision judge").
func kinds(m *mockupstream.Server) string {
	var out []string
	for _, r := range m.Requests() {
		if strings.HasSuffix(r.Path, "/chat/completions") {
			out = append(out, callKind(r))
		}
	}
	return strings.Join(out, " ")
}

// message returns the content of a recorded request's i-th message (-1: the last).
func message(r mockupstream.Recorded, i int) string {
	msgs := gjson.GetBytes(r.Body, "messages").Array()
	if i < 0 {
		i += len(msgs)
	}
	if i < 0 || i >= len(msgs) {
		return ""
	}
	return msgs[i].Get("content").Str
}

// dndPolicy is the pack's combat policy asset.
func dndPolicy(t *testing.T) string {
	t.Helper()
	reg, err := knowledge.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	p := reg.Pack("dnd").AssetText["combat_policy"]
	if p == "" {
		t.Fatal("the dnd pack has no combat_policy asset")
	}
	return p
}
