package semantic

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

var (
	registryOnce sync.Once
	registry     *knowledge.Registry
	registryErr  error
)

func dndPack(tb testing.TB) *knowledge.Pack {
	tb.Helper()
	registryOnce.Do(func() { registry, registryErr = knowledge.Builtin() })
	if registryErr != nil {
		tb.Fatal(registryErr)
	}
	return registry.Pack("dnd")
}

// Two labelled chunks of the D&D fixtures.
const (
	ambushChunk = "DM: Roll initiative, everyone.\nMaya (Seren): Seventeen.\nDM: Seren, you're up first. The two goblins are thirty feet away behind the wagon.\nMaya (Seren): I cast fire bolt at the closer one. That's a 19 to hit.\nDM: Hits. Roll damage.\n"
	planChunk   = "Tom (Brakka): If we hit the camp at dawn, the guards will be changing shifts.\nMaya (Seren): I can cast sleep on the sentries before they raise an alarm.\nDM: The fire crackles. Nobody at the camp knows you're here yet.\n"
)

// scene renders a scene description answer.
func scene(kind string) string {
	return `{"kind": "` + kind + `", "title": "A scene", "summary": "Something happens at the table."}`
}

// verdictJSON renders a judge answer.
func verdictJSON(verdict, explanation string) string {
	b, _ := json.Marshal(map[string]string{"verdict": verdict, "explanation": explanation})
	return string(b)
}

// judgeAnswer is one scripted answer of the fake upstream.
type judgeAnswer struct {
	content string
	status  int    // 0 means 200
	body    string // replaces the whole body when set
	refusal string
	err     error
	block   bool // wait until the call's context ends
	usage   interceptors.Usage
}

// fakeUpstream answers judge calls in order (the last answer repeats) and records
// each request with the time left until its deadline.
type fakeUpstream struct {
	mu       sync.Mutex
	answers  []judgeAnswer
	requests [][]byte
	left     []time.Duration
	// billed sums the usage of the answers sent.
	billed int
}

func newFake(answers ...judgeAnswer) *fakeUpstream { return &fakeUpstream{answers: answers} }

func (f *fakeUpstream) Complete(ctx context.Context, body []byte) (*interceptors.Response, error) {
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, append([]byte(nil), body...))
	if d, ok := ctx.Deadline(); ok {
		f.left = append(f.left, time.Until(d))
	} else {
		f.left = append(f.left, -1)
	}
	a := judgeAnswer{content: verdictJSON("approved", "Default.")}
	if len(f.answers) > 0 {
		a = f.answers[min(n, len(f.answers)-1)]
	}
	f.mu.Unlock()
	switch {
	case a.block:
		<-ctx.Done()
		return nil, ctx.Err()
	case a.err != nil:
		return nil, a.err
	}
	status := a.status
	if status == 0 {
		status = 200
	}
	body = []byte(a.body)
	if a.body == "" {
		usage := a.usage
		if usage == (interceptors.Usage{}) {
			usage = interceptors.Usage{PromptTokens: 300, CompletionTokens: 20, TotalTokens: 320}
		}
		msg := map[string]any{"role": "assistant", "content": a.content}
		if a.refusal != "" {
			msg["refusal"] = a.refusal
			msg["content"] = nil
		}
		f.mu.Lock()
		f.billed += usage.TotalTokens
		f.mu.Unlock()
		body, _ = json.Marshal(map[string]any{
			"id": "judge-1", "object": "chat.completion",
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": "stop"}},
			"usage":   usage,
		})
	}
	return &interceptors.Response{Status: status, Body: body}, nil
}

func (f *fakeUpstream) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeUpstream) request(i int) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[i]
}

var errConnRefused = errors.New("dial tcp 127.0.0.1:9: connect: connection refused")

// clientBody is a D&D app's request: its own system prompt, the chunk as the user
// message, metadata the judge must never see.
func clientBody(chunk string) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": "scene-writer",
		"messages": []map[string]string{
			{"role": "system", "content": "You describe scenes of our campaign log."},
			{"role": "user", "content": chunk},
		},
		"metadata": map[string]string{"chunk_id": "d01_goblin_ambush", "source_hash": "sha256:9f2c1e", "factgate.session": "campaign-7"},
	})
	return b
}

// exchange is a D&D exchange whose route upstream is up; the outgoing request's
// model is the route's upstream model.
func exchange(chunk string, up interceptors.Upstream) *interceptors.Exchange {
	body := clientBody(chunk)
	out := []byte(`{"model":"deepseek-chat","messages":[{"role":"system","content":"injected"},{"role":"user","content":` + mustJSON(chunk) + `}]}`)
	return &interceptors.Exchange{Route: "scenes", Model: "scene-writer", Original: body, Body: out, Upstream: up, Trace: interceptors.NewTrace("scenes")}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func newCombat(tb testing.TB, s Settings) *Validator {
	tb.Helper()
	v, err := NewValidator(dndPack(tb), "combat", s)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func keys(issues []interceptors.Issue) []string {
	out := make([]string, len(issues))
	for i, is := range issues {
		out[i] = is.Key()
	}
	return out
}
