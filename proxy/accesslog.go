package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

func (s *Server) logAccess(route string, rc *fasthttp.RequestCtx, status int, total, upstream time.Duration, client, errCode string) {
	if !s.accessLog {
		return
	}
	attrs := []slog.Attr{
		slog.String("route", route),
		slog.String("method", string(rc.Method())),
		slog.String("path", string(rc.Path())),
		slog.Int("status", status),
		slog.Float64("duration_ms", ms(total)),
		slog.Float64("upstream_ms", ms(upstream)),
	}
	if client != "" {
		attrs = append(attrs, slog.String("client", client))
	}
	if errCode != "" {
		attrs = append(attrs, slog.String("error", errCode))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// formatOverhead renders the X-Factgate-Overhead header value: milliseconds with
// microsecond precision ("0.412ms").
func formatOverhead(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return strconv.FormatFloat(ms(d), 'f', 3, 64) + "ms"
}

type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn("fasthttp", "msg", fmt.Sprintf(format, args...))
}
