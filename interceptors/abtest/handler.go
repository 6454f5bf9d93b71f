package abtest

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
)

// ReportPath is where the proxy serves the report.
const ReportPath = "/factgate/v1/experiments"

// reportTimeout bounds reading every experiment's counters for one report.
const reportTimeout = 10 * time.Second

// ReportHandler serves GET ReportPath: the Report of the experiments the function
// returns (called per request; nil or empty: an empty report), as JSON. The query
// parameters route and experiment narrow it to one route's or one experiment's
// (404 when none matches). Other methods get 405. Errors use the OpenAI error
// envelope.
func ReportHandler(experiments func() []*Experiment) fasthttp.RequestHandler {
	return func(rc *fasthttp.RequestCtx) {
		if !rc.IsGet() && !rc.IsHead() {
			rc.Response.Header.Set("Allow", "GET, HEAD")
			writeError(rc, interceptors.Errorf(405, "invalid_request_error", "method_not_allowed", "%s accepts GET, not %s", ReportPath, rc.Method()))
			return
		}
		route := string(rc.QueryArgs().Peek("route"))
		name := string(rc.QueryArgs().Peek("experiment"))
		var all, selected []*Experiment
		if experiments != nil {
			all = experiments()
		}
		for _, e := range all {
			if (route == "" || e.route == route) && (name == "" || e.name == name) {
				selected = append(selected, e)
			}
		}
		if len(selected) == 0 && (route != "" || name != "") {
			known := make([]string, 0, len(all))
			for _, e := range all {
				known = append(known, e.route+"/"+e.name)
			}
			if len(known) == 0 {
				known = append(known, "none configured")
			}
			writeError(rc, interceptors.Errorf(404, "invalid_request_error", "experiment_not_found",
				"no experiment matches route %q experiment %q (experiments: %s)", route, name, strings.Join(known, ", ")))
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
		defer cancel()
		b, err := json.Marshal(BuildReport(ctx, selected))
		if err != nil {
			writeError(rc, &interceptors.Error{Status: 500, Type: "server_error", Code: "internal_error", Message: "rendering the experiment report failed", Err: err})
			return
		}
		rc.SetStatusCode(200)
		rc.SetContentType("application/json")
		rc.Response.Header.Set("Cache-Control", "no-store")
		rc.SetBody(b)
	}
}

func writeError(rc *fasthttp.RequestCtx, e *interceptors.Error) {
	rc.SetStatusCode(e.Status)
	rc.SetContentType("application/json")
	rc.SetBody(e.Envelope())
}
