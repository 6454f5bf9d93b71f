package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
)

// fail answers with a factgate error and records it.
func (s *Server) fail(rc *fasthttp.RequestCtx, rm *routeMetrics, start time.Time, e *interceptors.Error) {
	writeError(rc, e)
	rm.error(e.Code)
	total := time.Since(start)
	rm.observe(e.Status, total, 0)
	rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(total))
	if s.accessLog {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "request",
			slog.String("route", rm.name), slog.Int("status", e.Status), slog.String("error", e.Code),
			slog.String("path", string(rc.Path())), slog.Float64("duration_ms", ms(total)))
	}
}

// writeError writes a factgate error as the OpenAI envelope.
func writeError(rc *fasthttp.RequestCtx, e *interceptors.Error) {
	status := e.Status
	if status == StatusClientClosed {
		// Nobody is listening; close rather than write a status clients don't know.
		rc.SetConnectionClose()
	}
	rc.Response.Reset()
	rc.SetStatusCode(status)
	rc.SetContentType("application/json")
	rc.SetBody(e.Envelope())
}

// jsonErrorPosition locates the first syntax error in b as " (line L, column C)".
func jsonErrorPosition(b []byte) string {
	off := jsonSyntaxOffset(b)
	if off < 0 {
		return ""
	}
	line, col := 1, 1
	for _, c := range b[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return fmt.Sprintf(" (line %d, column %d)", line, col)
}
