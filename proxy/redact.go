package proxy

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// redactBody returns a chat request or response body with every message content
// (and reasoning) replaced by its size, for debug logs: the shape of the body is
// visible, what users wrote and what models answered is not. Bodies are checked
// before they are logged; checking again to maxDepth levels keeps a future caller
// from handing gjson an unchecked one.
func redactBody(body []byte, maxDepth int) []byte {
	if !rawjson.Valid(body, maxDepth) {
		return []byte(`"[not JSON, ` + strconv.Itoa(len(body)) + ` bytes]"`)
	}
	out := body
	redact := func(path string, v gjson.Result) {
		if !v.Exists() || v.Type == gjson.Null {
			return
		}
		if b, err := sjson.SetBytes(out, path, "[redacted "+strconv.Itoa(len(v.Raw))+" bytes]"); err == nil {
			out = b
		}
	}
	for i, m := range gjson.GetBytes(body, "messages").Array() {
		redact("messages."+strconv.Itoa(i)+".content", m.Get("content"))
	}
	for i, c := range gjson.GetBytes(body, "choices").Array() {
		redact("choices."+strconv.Itoa(i)+".message.content", c.Get("message.content"))
		redact("choices."+strconv.Itoa(i)+".message.reasoning_content", c.Get("message.reasoning_content"))
	}
	return out
}

// debugBody logs a redacted body when log.debug_bodies is on and the level is debug.
func (s *Server) debugBodyLog(msg, route string, body []byte) {
	if !s.debugBody || !s.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	s.log.Debug(msg, "route", route, "body", string(redactBody(body, s.cfg.Server.MaxJSONDepth)))
}
