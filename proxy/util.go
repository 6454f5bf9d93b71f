package proxy

import (
	"encoding/json"
	"log/slog"
	"os"
)

// isEventStream reports a text/event-stream media type (parameters ignored,
// case-insensitive), without allocating.
func isEventStream(ct []byte) bool {
	const want = "text/event-stream"
	for len(ct) > 0 && (ct[0] == ' ' || ct[0] == '\t') {
		ct = ct[1:]
	}
	if len(ct) < len(want) {
		return false
	}
	for i := 0; i < len(want); i++ {
		c := ct[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != want[i] {
			return false
		}
	}
	rest := ct[len(want):]
	return len(rest) == 0 || rest[0] == ';' || rest[0] == ' ' || rest[0] == '\t'
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// newLogger builds the slog logger the config asks for, writing to stderr.
func newLogger(c LogConfig) *slog.Logger {
	var lvl slog.Level
	switch c.Level {
	case "debug":
		lvl = slog.LevelDebug
	case "warn":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}
