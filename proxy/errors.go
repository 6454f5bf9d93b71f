package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// fail answers with a factgate error and records it.
func (s *Server) fail(rc *fasthttp.RequestCtx, rm *routeMetrics, start time.Time, e *interceptors.Error) {
	s.telemetryOf(rc).Fail(e.Code)
	writeError(rc, e)
	rm.error(e.Code)
	total := time.Since(start)
	rm.observe(e.Status, total, 0)
	rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(total))
	if s.accessLog {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "request",
			slog.String("route", rm.name), slog.String("method", string(rc.Method())), slog.String("path", string(rc.Path())),
			slog.Int("status", e.Status), slog.String("error", e.Code), slog.Float64("duration_ms", ms(total)), remoteAttr(rc))
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

// invalidJSON is the 400 for a request body rawjson.Check refused: what is wrong
// and where, or the nesting limit and the key that sets it.
func invalidJSON(err error) *interceptors.Error {
	e := &interceptors.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json"}
	var se *rawjson.SyntaxError
	switch {
	case errors.As(err, &se) && se.MaxDepth > 0:
		e.Message = fmt.Sprintf("request body nests JSON deeper than the limit of %d levels (%s); the limit is server.max_json_depth",
			se.MaxDepth, se.Position())
	case errors.As(err, &se):
		e.Message = fmt.Sprintf("request body is not valid JSON: %s (%s)", se.Problem, se.Position())
	default:
		e.Message = "request body is not valid JSON: " + err.Error()
	}
	return e
}
