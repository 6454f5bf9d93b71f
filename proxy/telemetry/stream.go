package telemetry

import (
	"bytes"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// maxStreamLine bounds an event line the scan keeps; a longer one is skipped
// (a Responses stream's terminal event echoes the whole answer: past the bound its
// usage is not read).
const maxStreamLine = 1 << 20

// maxStreamText bounds the text the scan keeps with content on.
const maxStreamText = 1 << 20

// streamScan reads the events of a relayed stream for the call's response
// attributes: chat completion chunks (their id, model, finish reasons, the usage
// of the last chunk with include_usage, and the text of choice 0 with content on)
// or a Responses stream's terminal event (its response object).
type streamScan struct {
	responses, content bool
	line               []byte
	skipping           bool

	id, model string
	reasons   []string
	usage     []byte // the last usage object seen
	text      []byte
	final     []byte // a Responses stream's terminal response object
}

func (s *streamScan) scan(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.keep(p)
			return
		}
		s.keep(p[:i])
		if !s.skipping {
			s.event(s.line)
		}
		s.line, s.skipping = s.line[:0], false
		p = p[i+1:]
	}
}

func (s *streamScan) keep(p []byte) {
	if s.skipping {
		return
	}
	if len(s.line)+len(p) > maxStreamLine {
		s.skipping = true
		return
	}
	s.line = append(s.line, p...)
}

// event reads one line of the stream: only "data:" lines carry JSON.
func (s *streamScan) event(line []byte) {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' || !gjson.ValidBytes(data) {
		return
	}
	r := gjson.ParseBytes(data)
	if s.responses {
		switch r.Get("type").Str {
		case "response.completed", "response.incomplete", "response.failed":
			s.final = append(s.final[:0], r.Get("response").Raw...)
		}
		return
	}
	if s.id == "" {
		s.id = r.Get("id").Str
	}
	if m := r.Get("model").Str; m != "" {
		s.model = m
	}
	r.Get("choices").ForEach(func(_, ch gjson.Result) bool {
		if f := ch.Get("finish_reason"); f.Type == gjson.String {
			s.reasons = append(s.reasons, f.Str)
		}
		if s.content && ch.Get("index").Int() == 0 && len(s.text) < maxStreamText {
			s.text = append(s.text, ch.Get("delta.content").Str...)
		}
		return true
	})
	if u := r.Get("usage"); u.IsObject() {
		s.usage = append(s.usage[:0], u.Raw...)
	}
}

// attributes are what the stream told.
func (s *streamScan) attributes(c *Call, attrs []attribute.KeyValue) []attribute.KeyValue {
	if s.responses {
		if len(s.final) == 0 {
			return attrs
		}
		return c.answerAttributes(attrs, gjson.ParseBytes(s.final), s.final)
	}
	if s.id != "" {
		attrs = append(attrs, semconv.GenAIResponseID(s.id))
	}
	if s.model != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(s.model))
	}
	if len(s.reasons) > 0 {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(s.reasons...))
	}
	if len(s.usage) > 0 {
		attrs = appendUsage(attrs, string(s.usage))
	}
	if s.content && (len(s.text) > 0 || len(s.reasons) > 0) {
		reason := ""
		if len(s.reasons) > 0 {
			reason = s.reasons[0]
		}
		attrs = appendContent(attrs, semconv.GenAIOutputMessagesKey,
			encode([]message{{Role: "assistant", Parts: []part{{Type: "text", Content: string(s.text)}}, FinishReason: reason}}))
	}
	return attrs
}
