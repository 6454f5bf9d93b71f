package telemetry

import (
	"encoding/json"

	"github.com/tidwall/gjson"
)

// Message content in the GenAI conventions' JSON schemas (gen_ai.input.messages,
// gen_ai.output.messages, gen_ai.system_instructions), recorded only with
// content on. The attributes hold the JSON as a string, as the conventions allow
// where an attribute cannot be structured in every backend; a long value is cut
// by the SDK's OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT when one is set.

type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	Name         string `json:"name,omitempty"`
	FinishReason string `json:"finish_reason,omitempty"`
}

type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    string          `json:"result,omitempty"`
	Modality  string          `json:"modality,omitempty"`
	URI       string          `json:"uri,omitempty"`
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// inputMessages renders a chat completion request's messages (system messages
// among them, as the chat history carries them); sys is "" for a chat request.
func inputMessages(body []byte) (in, sys string) {
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() {
		return "", ""
	}
	var out []message
	msgs.ForEach(func(_, m gjson.Result) bool {
		out = append(out, chatMessage(m))
		return true
	})
	return encode(out), ""
}

// chatMessage renders one chat message: its text (a string, or text parts),
// images by URI, the tool calls of an assistant message, a tool message's result.
func chatMessage(m gjson.Result) message {
	msg := message{Role: m.Get("role").Str, Name: m.Get("name").Str, Parts: []part{}}
	content := m.Get("content")
	if msg.Role == "tool" {
		msg.Parts = append(msg.Parts, part{Type: "tool_call_response", ID: m.Get("tool_call_id").Str, Result: textOf(content)})
		return msg
	}
	switch {
	case content.Type == gjson.String:
		msg.Parts = append(msg.Parts, part{Type: "text", Content: content.Str})
	case content.IsArray():
		content.ForEach(func(_, p gjson.Result) bool {
			switch p.Get("type").Str {
			case "text", "input_text", "output_text":
				msg.Parts = append(msg.Parts, part{Type: "text", Content: p.Get("text").Str})
			case "image_url":
				msg.Parts = append(msg.Parts, part{Type: "uri", Modality: "image", URI: p.Get("image_url.url").Str})
			}
			return true
		})
	}
	m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		msg.Parts = append(msg.Parts, toolCall(tc.Get("id").Str, tc.Get("function.name").Str, tc.Get("function.arguments")))
		return true
	})
	return msg
}

// toolCall renders a tool call; its arguments, a JSON text, stay JSON when they
// are.
func toolCall(id, name string, args gjson.Result) part {
	p := part{Type: "tool_call", ID: id, Name: name}
	if args.Type == gjson.String && gjson.Valid(args.Str) {
		p.Arguments = json.RawMessage(args.Str)
	} else if args.Exists() {
		p.Arguments, _ = json.Marshal(args.String())
	}
	return p
}

// textOf is a content's text: a string, or its text parts joined.
func textOf(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var s string
	c.ForEach(func(_, p gjson.Result) bool {
		if t := p.Get("text"); t.Type == gjson.String {
			s += t.Str
		}
		return true
	})
	return s
}

// outputMessages renders a chat completion's choices, one message each.
func outputMessages(body []byte) string {
	choices := gjson.GetBytes(body, "choices")
	if !choices.IsArray() {
		return ""
	}
	var out []message
	choices.ForEach(func(_, ch gjson.Result) bool {
		m := chatMessage(ch.Get("message"))
		if m.Role == "" {
			m.Role = "assistant"
		}
		m.FinishReason = ch.Get("finish_reason").Str
		out = append(out, m)
		return true
	})
	return encode(out)
}

// responsesInput renders a Responses API request's input (a string, or items:
// messages, function calls and their outputs) and its instructions, which the
// API takes apart from the input.
func responsesInput(body []byte) (in, sys string) {
	r := gjson.ParseBytes(body)
	if ins := r.Get("instructions"); ins.Type == gjson.String && ins.Str != "" {
		sys = encode([]part{{Type: "text", Content: ins.Str}})
	}
	input := r.Get("input")
	var out []message
	switch {
	case input.Type == gjson.String:
		out = append(out, message{Role: "user", Parts: []part{{Type: "text", Content: input.Str}}})
	case input.IsArray():
		input.ForEach(func(_, it gjson.Result) bool {
			switch it.Get("type").Str {
			case "function_call":
				out = append(out, message{Role: "assistant", Parts: []part{toolCall(it.Get("call_id").Str, it.Get("name").Str, it.Get("arguments"))}})
			case "function_call_output":
				out = append(out, message{Role: "tool", Parts: []part{{Type: "tool_call_response", ID: it.Get("call_id").Str, Result: textOf(it.Get("output"))}}})
			case "", "message":
				out = append(out, chatMessage(it))
			}
			return true
		})
	default:
		return "", sys
	}
	return encode(out), sys
}

// responsesOutput renders a Responses object's output: its messages' text and its
// function calls, as one output message.
func responsesOutput(r gjson.Result) string {
	m := message{Role: "assistant", Parts: []part{}, FinishReason: r.Get("status").Str}
	r.Get("output").ForEach(func(_, it gjson.Result) bool {
		switch it.Get("type").Str {
		case "message":
			it.Get("content").ForEach(func(_, c gjson.Result) bool {
				if c.Get("type").Str == "output_text" {
					m.Parts = append(m.Parts, part{Type: "text", Content: c.Get("text").Str})
				}
				return true
			})
		case "function_call":
			m.Parts = append(m.Parts, toolCall(it.Get("call_id").Str, it.Get("name").Str, it.Get("arguments")))
		}
		return true
	})
	if len(m.Parts) == 0 && m.FinishReason == "" {
		return ""
	}
	return encode([]message{m})
}
