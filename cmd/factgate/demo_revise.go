package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/proxy/mockupstream"
)

// --- the hidden revision (the seed's story) ---

// demoRevisionRoute is the validating route of the demo: the ra3 pack, knowledge
// and claims contract injected, answers validated and revised.
const demoRevisionRoute = `  - name: ra3-validated
    models: [ra3-validated]
    upstream: mock
    upstream_model: deepseek-chat
    pack: ra3
    inject: {}
    validate: {}
    revise: {}
`

// demoAsk marks the demo's revision request so the mock answers it with the
// scripted draft.
const demoAsk = "请分析这局录像，并按系统提示附上机器可读声明。"

// The seed's story: the first draft claims 733 is a bomber at 6:02 (PlayerA
// produces its first bomber at 9:10) and that 587 is confirmed as the Allied MCV
// (an unpack fits the miner's command hub too). The corrected answer says what
// the facts allow.
const (
	demoDraft = "## 对局概览\nPlayerA（盟军）开局稳健，1:24 打包主基地 246，1:41 在前线展开。6:02 PlayerA 出动世纪轰炸机 733 空袭苏联基地；587 在 1:41 展开，确认是盟军基地车。\n\n" +
		"[机器可读声明]\n```json\n{\n  \"unitClaims\": [\n" +
		"    {\"unitId\": 733, \"player\": \"PlayerA\", \"claim\": \"AlliedBomberAircraft\", \"evidenceLevel\": \"highly likely\", \"evidence\": [\"select|6:02.00|733\"], \"alternatives\": [], \"needsConfirmation\": []},\n" +
		"    {\"unitId\": 587, \"player\": \"PlayerA\", \"claim\": \"AlliedMCV\", \"evidenceLevel\": \"confirmed\", \"evidence\": [\"power|1:41.00|SpecialPower_UnpackReplaceSelf|587\"], \"alternatives\": [], \"needsConfirmation\": []},\n" +
		"    {\"unitId\": 246, \"player\": \"PlayerA\", \"claim\": \"AlliedConstructionYard\", \"evidenceLevel\": \"confirmed\", \"evidence\": [\"power|1:24.00|SpecialPower_PackReplaceSelf|246\"], \"alternatives\": [], \"needsConfirmation\": []}\n" +
		"  ],\n  \"eventClaims\": [],\n  \"timelineClaims\": []\n}\n```\n"
	demoCorrected = "## 对局概览\nPlayerA（盟军）开局稳健，1:24 打包主基地 246，1:41 在前线展开。PlayerA 在 5:30 生产了第一架战斗机，6:02 选中的 733 可能就是它；第一架世纪轰炸机要到 9:10 才出厂。587 在 1:41 展开，可能是基地车，也可能是矿车展开的指挥中心。\n\n" +
		"[机器可读声明]\n```json\n{\n  \"unitClaims\": [\n" +
		"    {\"unitId\": 733, \"player\": \"PlayerA\", \"claim\": \"AlliedFighterAircraft\", \"evidenceLevel\": \"possible\", \"evidence\": [\"select|6:02.00|733\", \"produce|5:30.00|AlliedFighterAircraft|655\"], \"alternatives\": [\"其他空中单位\"], \"needsConfirmation\": [\"733 之后是否参与对空作战\"]},\n" +
		"    {\"unitId\": 587, \"player\": \"PlayerA\", \"claim\": \"AlliedMCV\", \"evidenceLevel\": \"possible\", \"evidence\": [\"power|1:41.00|SpecialPower_UnpackReplaceSelf|587\"], \"alternatives\": [\"AlliedMiner\"], \"needsConfirmation\": [\"587 之后是否作为建造者出现\"]},\n" +
		"    {\"unitId\": 246, \"player\": \"PlayerA\", \"claim\": \"AlliedConstructionYard\", \"evidenceLevel\": \"confirmed\", \"evidence\": [\"power|1:24.00|SpecialPower_PackReplaceSelf|246\"], \"alternatives\": [], \"needsConfirmation\": []}\n" +
		"  ],\n  \"eventClaims\": [],\n  \"timelineClaims\": []\n}\n```\n"
)

// demoRevisionRules are the mock's answers for the story: the draft for the demo's
// request, the corrected answer for the hidden revision request (the one that
// carries the draft as an assistant turn).
func demoRevisionRules() []mockupstream.Rule {
	no, yes := false, true
	return []mockupstream.Rule{
		{Name: "story-revision", Match: mockupstream.Match{HasAssistant: &yes, Assistant: "世纪轰炸机 733"},
			Answer: &mockupstream.Answer{Content: demoCorrected, Usage: &mockupstream.Usage{PromptTokens: 9650, CompletionTokens: 410}}},
		{Name: "story-draft", Match: mockupstream.Match{HasAssistant: &no, LastUser: demoAsk},
			Answer: &mockupstream.Answer{Content: demoDraft, Reasoning: "先看操作记录里 733 和 587 的出现时间……",
				Usage: &mockupstream.Usage{PromptTokens: 9120, CompletionTokens: 380}}},
	}
}

// runRevision tells the seed's story through the validating route.
func (d *demo) runRevision(ctx context.Context, w io.Writer) error {
	fmt.Fprintln(w, "\n4. The hidden revision: the same replay through route \"ra3-validated\" (pack ra3: inject, validate, revise).")
	req := goopenai.ChatCompletionRequest{
		Model: "ra3-validated",
		Messages: []goopenai.ChatCompletionMessage{
			{Role: "system", Content: "你是红警 3 录像分析助手。"},
			{Role: "user", Content: demoAsk + "\n" + demoReplay},
		},
	}
	// The records of the earlier sections' requests may still be on their way:
	// the mock records a request once its answer is written.
	if err := d.mock.WaitIdle(5 * time.Second); err != nil {
		return err
	}
	before := len(d.mock.Requests())
	resp, err := d.client().CreateChatCompletion(ctx, req)
	if err != nil {
		return fmt.Errorf("chat completion on the validating route: %w", err)
	}
	hdrs := d.hdrs.Clone()
	traceID := hdrs.Get("X-Factgate-Trace-Id")
	tr, err := d.trace(ctx, traceID)
	if err != nil {
		return err
	}
	all, err := d.mock.WaitFor(before+2, 5*time.Second)
	recs := all[before:]
	if err != nil || len(recs) < 2 {
		return fmt.Errorf("the mock upstream saw %d calls, want the draft and a revision", len(recs))
	}

	fmt.Fprintln(w, "   a) The model's first draft (scripted; the client never sees it):")
	indent(w, "      ", proseOf(gjson.GetBytes(tr, "attempts.0.content").Str))
	fmt.Fprintln(w, "      + a claims block: 733 AlliedBomberAircraft (highly likely), 587 AlliedMCV (confirmed), 246 AlliedConstructionYard (confirmed)")

	fmt.Fprintf(w, "   b) The validator checked the claims against the replay's facts: %s\n", gjson.GetBytes(tr, "attempts.0.counts").Str)
	printDraftIssues(w, "      - %-13s %-26s %-14s %s\n", tr)

	turn := lastUserTurn(recs[1].Body)
	fmt.Fprintf(w, "   c) The hidden revision request (%d bytes, %.2fx the original %d): the original messages, the draft as the\n      assistant turn, and this user turn:\n",
		len(recs[1].Body), float64(len(recs[1].Body))/float64(len(recs[0].Body)), len(recs[0].Body))
	indent(w, "      | ", abbreviate(turn, 16))

	fmt.Fprintln(w, "   d) The model's corrected answer (scripted):")
	indent(w, "      ", proseOf(demoCorrected))

	fmt.Fprintln(w, "   e) What the client received (the claims block is stripped: the proxy injected the contract, the app never asked):")
	indent(w, "      ", resp.Choices[0].Message.Content)
	fmt.Fprintf(w, "      X-Factgate-Revisions: %s\n      X-Factgate-Issues:    %s\n      X-Factgate-Trace-Id:  %s\n",
		hdrs.Get("X-Factgate-Revisions"), hdrs.Get("X-Factgate-Issues"), traceID)
	fmt.Fprintf(w, "      usage: prompt %d, completion %d, total %d (the draft and the revision, summed)\n", resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.TotalTokens)
	fmt.Fprintf(w, "      outcome %q; every attempt, its issues, sizes and tokens: GET %s/factgate/v1/traces/%s (with the request's credential, Authorization: Bearer %s)\n", gjson.GetBytes(tr, "final.outcome").Str, d.base, traceID, demoKey)

	req.Stream = true
	req.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
	stream, err := d.client().CreateChatCompletionStream(ctx, req)
	if err != nil {
		return fmt.Errorf("streaming on the validating route: %w", err)
	}
	defer stream.Close()
	var content strings.Builder
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("streaming on the validating route: %w", err)
		}
		if len(chunk.Choices) > 0 {
			content.WriteString(chunk.Choices[0].Delta.Content)
		}
	}
	fmt.Fprintf(w, "   f) Streamed, the client receives the same clean answer: %v\n", content.String() == resp.Choices[0].Message.Content)
	return nil
}

// proseOf returns an answer without its claims block.
func proseOf(answer string) string {
	if i := strings.Index(answer, "[机器可读声明]"); i >= 0 {
		return strings.TrimSpace(answer[:i])
	}
	return strings.TrimSpace(answer)
}

// abbreviate keeps the first n lines of s and says how many were left out.
func abbreviate(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n... (%d more lines)", len(lines)-n)
}

func indent(w io.Writer, prefix, text string) {
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintln(w, prefix+line)
	}
}

// printDraftIssues prints the first draft's issues of a trace, one line each in
// format (severity, code, path, message).
func printDraftIssues(w io.Writer, format string, tr []byte) {
	gjson.GetBytes(tr, "attempts.0.issues").ForEach(func(_, is gjson.Result) bool {
		fmt.Fprintf(w, format, is.Get("severity").Str, is.Get("code").Str, is.Get("path").Str, is.Get("message").Str)
		return true
	})
}

// lastUserTurn is the content of the last message of a chat request body: the
// user turn a hidden revision request adds.
func lastUserTurn(body []byte) string {
	msgs := gjson.GetBytes(body, "messages").Array()
	if len(msgs) == 0 {
		return ""
	}
	return msgs[len(msgs)-1].Get("content").Str
}
