package abtest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
)

// serve runs the handler on one request and returns the status and body.
func serve(h fasthttp.RequestHandler, method, uri string) (int, []byte, string) {
	var rc fasthttp.RequestCtx
	rc.Request.Header.SetMethod(method)
	rc.Request.SetRequestURI(uri)
	h(&rc)
	return rc.Response.StatusCode(), append([]byte(nil), rc.Response.Body()...), string(rc.Response.Header.ContentType())
}

func TestReportHandler(t *testing.T) {
	t.Parallel()
	e := newExperiment(t, twoVariants)
	ex := exchange(`{"model":"m","user":"u"}`, nil, "")
	run(t, e, ex, finished{status: 200, validated: true, draft: issues(interceptors.Contradiction), outcome: OutcomeResolved, revisions: []int{10}, draftTokens: 20})
	respond(t, e, ex)
	e.Wait()
	h := ReportHandler(func() []*Experiment { return []*Experiment{e} })

	tests := []struct {
		name, method, uri string
		status            int
		check             func(t *testing.T, body []byte)
	}{
		{name: "the report", method: "GET", uri: ReportPath, status: 200, check: func(t *testing.T, body []byte) {
			var rep Report
			if err := json.Unmarshal(body, &rep); err != nil {
				t.Fatalf("not a report: %v\n%s", err, body)
			}
			if rep.Confidence != 0.95 || len(rep.Experiments) != 1 || rep.Experiments[0].Name != "prompt-test" || rep.Experiments[0].Route != "ra3" {
				t.Fatalf("report %s", body)
			}
			total := int64(0)
			for _, v := range rep.Experiments[0].Variants {
				total += v.Rates.FirstDraftContradiction.Count
			}
			if total != 1 {
				t.Errorf("the contradicted draft is not in the report: %s", body)
			}
			// A rate without data is null, not 0: no data is not a 0% rate.
			for _, v := range gjson.GetBytes(body, "experiments.0.variants").Array() {
				if v.Get("requests").Int() == 0 && v.Get("rates.first_draft_contradiction.rate").Type != gjson.Null {
					t.Errorf("an empty variant's rate is %s, want null", v.Get("rates.first_draft_contradiction.rate").Raw)
				}
			}
		}},
		{name: "narrowed to the experiment", method: "GET", uri: ReportPath + "?experiment=prompt-test&route=ra3", status: 200},
		{name: "an unknown experiment is a 404 naming the known ones", method: "GET", uri: ReportPath + "?experiment=nope", status: 404, check: func(t *testing.T, body []byte) {
			if e := gjson.GetBytes(body, "error"); e.Get("code").Str != "experiment_not_found" || !strings.Contains(e.Get("message").Str, "ra3/prompt-test") {
				t.Errorf("envelope %s", body)
			}
		}},
		{name: "POST is not allowed", method: "POST", uri: ReportPath, status: 405, check: func(t *testing.T, body []byte) {
			if gjson.GetBytes(body, "error.code").Str != "method_not_allowed" {
				t.Errorf("envelope %s", body)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, body, ct := serve(h, tc.method, tc.uri)
			if status != tc.status || ct != "application/json" {
				t.Fatalf("%d %s: %s", status, ct, body)
			}
			if tc.check != nil {
				tc.check(t, body)
			}
		})
	}

	status, body, _ := serve(ReportHandler(nil), "GET", ReportPath)
	if status != 200 || string(body) != `{"confidence":0.95,"experiments":[]}` {
		t.Errorf("without experiments: %d %s", status, body)
	}
}
