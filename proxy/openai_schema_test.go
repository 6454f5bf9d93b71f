package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// The schema test: every object and stream event factgate synthesizes — the
// Responses objects and events it builds from a chat upstream's answer, the chat
// completion chunks it streams for a held answer, its error envelopes — checked
// against the OpenAI OpenAPI spec (openai/openai-openapi, info.version 2.3.0) with
// a JSON Schema validator.
//
// The spec is read from testdata/openai-openapi/openapi.yaml, or the file
// FACTGATE_OPENAI_OPENAPI names; testdata/openai-openapi/README.md says where it
// comes from and how to get it.

// openAISpecFile is where the schema test looks for the spec.
func openAISpecFile(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("FACTGATE_OPENAI_OPENAPI"), filepath.Join("testdata", "openai-openapi", "openapi.yaml")} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("the OpenAI OpenAPI spec is not in testdata/openai-openapi/openapi.yaml and FACTGATE_OPENAI_OPENAPI names no file: " +
		"the schema test of factgate's synthesized objects did not run (testdata/openai-openapi/README.md says where to get it)")
	return ""
}

var openAISpec struct {
	once     sync.Once
	compiler *jsonschema.Compiler
	err      error
	schemas  sync.Map // name -> *jsonschema.Schema
	// events maps a Responses stream event's type to its schema's name.
	events map[string]string
}

// specSchema compiles #/components/schemas/<name> of the spec.
func specSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	file := openAISpecFile(t)
	openAISpec.once.Do(func() {
		raw, err := os.ReadFile(file)
		if err != nil {
			openAISpec.err = err
			return
		}
		var doc any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			openAISpec.err = fmt.Errorf("%s: %w", file, err)
			return
		}
		rewriteRecursiveRefs(doc)
		if err := allowLiveNulls(doc); err != nil {
			openAISpec.err = err
			return
		}
		openAISpec.events = streamEventTypes(doc)
		doc, err = jsonValues(doc)
		if err != nil {
			openAISpec.err = err
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource("https://factgate.test/openapi.json", doc); err != nil {
			openAISpec.err = err
			return
		}
		openAISpec.compiler = c
	})
	if openAISpec.err != nil {
		t.Fatalf("the OpenAI spec: %v", openAISpec.err)
	}
	if s, ok := openAISpec.schemas.Load(name); ok {
		return s.(*jsonschema.Schema)
	}
	s, err := openAISpec.compiler.Compile("https://factgate.test/openapi.json#/components/schemas/" + name)
	if err != nil {
		t.Fatalf("compiling %s: %v", name, err)
	}
	openAISpec.schemas.Store(name, s)
	return s
}

// allowLiveNulls lets a Response say "user": null and "usage": null, as the live
// API does (usage is null in response.created and response.in_progress, user when
// the request sets none) while the spec types them string and object; nothing
// else is loosened.
func allowLiveNulls(doc any) error {
	schemas := componentSchemas(doc)
	orNull := func(m map[string]any, key, where string) error {
		v, ok := m[key]
		if !ok {
			return fmt.Errorf("the spec has no %s: the schema test's allowance for the live API's null needs a new place", where)
		}
		m[key] = map[string]any{"anyOf": []any{v, map[string]any{"type": "null"}}}
		return nil
	}
	mrp, _ := schemas["ModelResponseProperties"].(map[string]any)
	props, _ := mrp["properties"].(map[string]any)
	if err := orNull(props, "user", "ModelResponseProperties.user"); err != nil {
		return err
	}
	resp, _ := schemas["Response"].(map[string]any)
	all, _ := resp["allOf"].([]any)
	for _, part := range all {
		p, _ := part.(map[string]any)
		if props, ok := p["properties"].(map[string]any); ok && props["usage"] != nil {
			return orNull(props, "usage", "Response.usage")
		}
	}
	return errors.New("the spec's Response has no usage")
}

func componentSchemas(doc any) map[string]any {
	root, _ := doc.(map[string]any)
	comps, _ := root["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	return schemas
}

// streamEventTypes maps each event type of ResponseStreamEvent to the schema
// that defines it ("response.completed" -> "ResponseCompletedEvent").
func streamEventTypes(doc any) map[string]string {
	schemas := componentSchemas(doc)
	out := map[string]string{}
	ev, _ := schemas["ResponseStreamEvent"].(map[string]any)
	refs, _ := ev["anyOf"].([]any)
	for _, r := range refs {
		ref, _ := r.(map[string]any)["$ref"].(string)
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		s, _ := schemas[name].(map[string]any)
		props, _ := s["properties"].(map[string]any)
		typ, _ := props["type"].(map[string]any)
		if enum, _ := typ["enum"].([]any); len(enum) == 1 {
			if v, ok := enum[0].(string); ok {
				out[v] = name
			}
		}
	}
	return out
}

// conformEvent checks a Responses stream event against the schema of its type.
func conformEvent(t *testing.T, what string, raw []byte) {
	t.Helper()
	specSchema(t, "ResponseStreamEvent") // loads the spec
	var ev struct{ Type string }
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Errorf("%s: not JSON: %v\n%s", what, err, raw)
		return
	}
	name := openAISpec.events[ev.Type]
	if name == "" {
		t.Errorf("%s: the spec has no stream event of type %q:\n%s", what, ev.Type, raw)
		return
	}
	conform(t, what, name, raw)
}

// rewriteRecursiveRefs says in draft 2020-12 (OpenAPI 3.1's dialect) what two
// older keywords left in the spec mean: draft 2019-09's "$recursiveRef": "#"
// inside components.schemas.N is a $ref to N ("$recursiveAnchor" goes), and
// OpenAPI 3.0's "nullable: true" is an anyOf with null.
func rewriteRecursiveRefs(doc any) {
	root, _ := doc.(map[string]any)
	comps, _ := root["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	var walk func(v any, self string)
	walk = func(v any, self string) {
		switch v := v.(type) {
		case map[string]any:
			delete(v, "$recursiveAnchor")
			if r, ok := v["$recursiveRef"]; ok && r == "#" {
				delete(v, "$recursiveRef")
				v["$ref"] = "#/components/schemas/" + self
			}
			for k, c := range v {
				walk(c, self)
				// OpenAPI 3.0's "nullable: true", left in places, means null is
				// allowed too; a 2020-12 validator ignores the keyword.
				if m, ok := c.(map[string]any); ok && m["nullable"] == true {
					delete(m, "nullable")
					v[k] = map[string]any{"anyOf": []any{m, map[string]any{"type": "null"}}}
				}
			}
		case []any:
			for i, c := range v {
				walk(c, self)
				if m, ok := c.(map[string]any); ok && m["nullable"] == true {
					delete(m, "nullable")
					v[i] = map[string]any{"anyOf": []any{m, map[string]any{"type": "null"}}}
				}
			}
		}
	}
	for name, s := range schemas {
		walk(s, name)
	}
}

// jsonValues turns what yaml decodes (map[string]any, ints) into the values
// encoding/json would (float64 numbers), which the validator takes.
func jsonValues(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// conform reports whether raw is valid against the spec's schema name.
func conform(t *testing.T, what, name string, raw []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Errorf("%s: not JSON: %v\n%s", what, err, raw)
		return
	}
	if err := specSchema(t, name).Validate(v); err != nil {
		t.Errorf("%s does not conform to %s:\n%v\n%s", what, name, err, raw)
	}
}

// sseEvent is one server-sent event: its event name and data.
type sseEvent struct {
	name string
	data []byte
}

// sseEvents splits an event stream into events (comments dropped).
func sseEvents(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != nil {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			cur.name = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			d := strings.TrimPrefix(line[len("data:"):], " ")
			if cur.data != nil {
				cur.data = append(cur.data, '\n')
			}
			cur.data = append(cur.data, d...)
		}
	}
	if cur.data != nil {
		out = append(out, cur)
	}
	return out
}

// schemaScript answers the schema test's requests: plain text, a reasoning model's
// answer, tool calls, a cut answer, and a failure after a held stream began.
const schemaScript = `
rules:
  - match: {last_user: "^think"}
    answer: {reasoning: "Weigh it first.", content: "Thought through."}
  - match: {last_user: "weather"}
    answer:
      tool_calls:
        - id: call_1
          function: {name: get_weather, arguments: '{"city":"Paris"}'}
  - match: {last_user: "^cut"}
    answer: {content: "cut sho", finish_reason: length}
  - match: {last_user: "^late failure"}
    answer:
      latency: 500ms
      fault:
        status: 500
        body: '{"error":{"message":"upstream exploded","type":"server_error","param":null,"code":"boom"}}'
default: {content: "A plain answer."}
`

// TestSynthesizedObjectsConformToTheOpenAISpec sends requests that make factgate
// build its own objects and checks each against the spec: a Responses object
// (non-streamed, and inside response.created … response.completed) for a text
// answer, a reasoning answer, tool calls with the request's function tools
// echoed, a cut answer; every Responses stream event including the error event;
// the chat completion chunks of a held stream (content, tool calls, the usage
// chunk); and factgate's error envelope.
func TestSynthesizedObjectsConformToTheOpenAISpec(t *testing.T) {
	t.Parallel()
	openAISpecFile(t)
	h := newHarness(t, schemaScript, responsesConfig+"  - {name: held-chat, models: [held-c], upstream: chatup, pack: ra3, inject: {when: always}}\n")
	tools := `[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	requests := []struct{ name, body string }{
		{"text", `{"model":"%s","input":"hello"}`},
		{"reasoning", `{"model":"%s","input":"think about it","reasoning":{"effort":"low"}}`},
		{"tool calls", `{"model":"%s","input":"What's the weather in Paris?","tools":` + tools + `}`},
		{"tool calls, strict", `{"model":"%s","input":"What's the weather in Paris?","tools":[{"type":"function","name":"get_weather","description":"the weather","strict":true,"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}]}`},
		{"cut", `{"model":"%s","input":"cut it","max_output_tokens":2}`},
		{"with a user", `{"model":"%s","input":"hello","user":"player-1","metadata":{"k":"v"},"temperature":0.5}`},
	}
	for _, model := range []string{"plain-c", "ra3-c"} {
		for _, rq := range requests {
			body := fmt.Sprintf(rq.body, model)
			status, _, resp := h.post(t, "/v1/responses", body)
			if status != 200 {
				t.Fatalf("%s %s: %d %s", model, rq.name, status, resp)
			}
			conform(t, model+" "+rq.name+": the response object", "Response", resp)

			streamBody := strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
			status, _, raw := h.post(t, "/v1/responses", streamBody)
			if status != 200 {
				t.Fatalf("%s %s streamed: %d %s", model, rq.name, status, raw)
			}
			events := sseEvents(t, raw)
			if len(events) < 3 {
				t.Fatalf("%s %s streamed: %d events:\n%s", model, rq.name, len(events), raw)
			}
			for i, ev := range events {
				conformEvent(t, fmt.Sprintf("%s %s: stream event %d (%s)", model, rq.name, i, ev.name), ev.data)
			}
		}
		// An upstream failure after a held stream's headers went out: the error event.
		status, _, raw := h.post(t, "/v1/responses", `{"stream":true,"model":"`+model+`","input":"late failure"}`)
		if model == "ra3-c" {
			events := sseEvents(t, raw)
			if status != 200 || len(events) == 0 || events[len(events)-1].name != "error" {
				t.Fatalf("%s late failure: %d, want a stream ending with an error event:\n%s", model, status, raw)
			}
			for i, ev := range events {
				conformEvent(t, fmt.Sprintf("%s late failure: stream event %d (%s)", model, i, ev.name), ev.data)
			}
		}
	}

	// The chat completion chunks factgate synthesizes for a held stream.
	for _, rq := range []struct{ name, body string }{
		{"text", `{"model":"held-c","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`},
		{"reasoning", `{"model":"held-c","stream":true,"messages":[{"role":"user","content":"think about it"}]}`},
		{"tool calls", `{"model":"held-c","stream":true,"messages":[{"role":"user","content":"What's the weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`},
		{"cut", `{"model":"held-c","stream":true,"messages":[{"role":"user","content":"cut it"}]}`},
	} {
		status, _, raw := h.post(t, "/v1/chat/completions", rq.body)
		if status != 200 {
			t.Fatalf("chat %s: %d %s", rq.name, status, raw)
		}
		events := sseEvents(t, raw)
		if len(events) < 2 || string(events[len(events)-1].data) != "[DONE]" {
			t.Fatalf("chat %s: not a stream ending in [DONE]:\n%s", rq.name, raw)
		}
		for i, ev := range events[:len(events)-1] {
			conform(t, fmt.Sprintf("chat %s: chunk %d", rq.name, i), "CreateChatCompletionStreamResponse", ev.data)
		}
	}

	// factgate's own errors.
	for _, rq := range []struct{ name, path, body string }{
		{"model_not_found (chat)", "/v1/chat/completions", `{"model":"nobody-serves-this","messages":[{"role":"user","content":"hi"}]}`},
		{"model_not_found (responses)", "/v1/responses", `{"model":"nobody-serves-this","input":"hi"}`},
		{"unsupported_parameter", "/v1/responses", `{"model":"ra3-c","input":"x","previous_response_id":"resp_1"}`},
		{"invalid_json", "/v1/chat/completions", `{"model":`},
	} {
		status, _, body := h.post(t, rq.path, rq.body)
		if status < 400 {
			t.Fatalf("%s: %d %s", rq.name, status, body)
		}
		conform(t, rq.name, "ErrorResponse", body)
	}
	_ = http.StatusOK
}
