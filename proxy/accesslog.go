package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
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
		remoteAttr(rc),
	}
	if client != "" {
		attrs = append(attrs, slog.String("client", client))
	}
	if errCode != "" {
		attrs = append(attrs, slog.String("error", errCode))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}

// remoteAttr is the client's address in the access log.
func remoteAttr(rc *fasthttp.RequestCtx) slog.Attr {
	return slog.String("remote", rc.RemoteIP().String())
}

// logAPI logs a factgate API call: the client key (or console session) that
// made it, what it asked and the status, with the error code of a failure. A
// stream (the console's live feed) is logged when it starts.
func (s *Server) logAPI(rc *fasthttp.RequestCtx, start time.Time, client string) {
	status, code := rc.Response.StatusCode(), ""
	if status >= 400 {
		// Errors are bodies, never streams: reading one consumes nothing.
		code = gjson.GetBytes(rc.Response.Body(), "error.code").Str
	}
	s.logAccess("api", rc, status, time.Since(start), 0, client, code)
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
