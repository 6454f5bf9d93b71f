package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors/abtest"
)

// reportServer serves testdata/experiments/report.json (a report of three variants:
// baseline 62/196 contradicted first drafts, strict 31/190, terse without data) to
// requests with the bearer key "k-123", and records the last query.
func reportServer(t *testing.T) (*httptest.Server, *string) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "experiments", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	query := new(string)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/factgate/v1/experiments" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer k-123" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"invalid API key","type":"authentication_error","param":null,"code":"invalid_api_key"}}`))
			return
		}
		*query = r.URL.RawQuery
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, query
}

// wantReportTable is the table for testdata/experiments/report.json. The rates
// are the report's (62/196 = 31.6%, Wilson [25.5, 38.4]); the table only formats.
const wantReportTable = `Experiment strict-rules · route ra3 · control baseline
Rates with 95% Wilson intervals. Forced requests (X-Factgate-Variant) are counted apart.

                            baseline (control)   strict               terse
weight                      50 (45%)             50 (45%)             10 (9%)
requests                    200                  190                  0
forced (not counted)        3                    0                    0
validated drafts            196                  190                  0
first-draft contradiction   31.6% [25.5, 38.4]   16.3% [11.7, 22.2]   -
revised                     33.7% [27.4, 40.5]   17.9% [13.1, 24.0]   -
resolved (of triggered)     72.9% [61.5, 81.9]   83.3% [68.1, 92.1]   -
downgraded                  9.7% [6.3, 14.6]     3.2% [1.5, 6.7]      -
residual contradiction      4.6% [2.4, 8.5]      2.1% [0.8, 5.3]      -
upstream errors             2.0% [0.8, 5.0]      0.0% [0.0, 2.0]      -
hidden calls                91                   41                   0
mean latency                3.06 s               2.30 s               -
p95 latency                 ≤ 5.00 s             ≤ 5.00 s             -
mean tokens                 2194                 1737                 -

Against the control baseline (variant − control, 95% Newcombe interval; pooled two-proportion z-test):
  strict   first-draft contradiction   -15.3 pp [-23.5, -6.8]   z = -3.52   p = 0.0004   lower (significant at 5%)
  strict   revised                     -15.8 pp [-24.2, -7.1]   z = -3.54   p = 0.0004   lower (significant at 5%)
  strict   residual contradiction      -2.5 pp [-6.6, +1.4]     z = -1.35   p = 0.1758   no significant difference
  terse    first-draft contradiction   no data                  no test                  a variant has no validated answers yet
  terse    revised                     no data                  no test                  a variant has no validated answers yet
  terse    residual contradiction      no data                  no test                  a variant has no validated answers yet
`

func TestExperimentsReportTable(t *testing.T) {
	t.Parallel()
	srv, query := reportServer(t)
	code, out, errOut := runMain(t, "experiments", "report", "--url", srv.URL+"/", "--key", "k-123", "--route", "ra3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if out != wantReportTable {
		t.Errorf("table:\n%s\nwant:\n%s", out, wantReportTable)
	}
	if *query != "route=ra3" {
		t.Errorf("query %q, want route=ra3", *query)
	}
}

func TestExperimentsReportJSON(t *testing.T) {
	t.Parallel()
	srv, _ := reportServer(t)
	code, out, errOut := runMain(t, "experiments", "report", "--url", srv.URL, "--key", "k-123", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want, _ := os.ReadFile(filepath.Join("testdata", "experiments", "report.json"))
	var got, exp bytes.Buffer
	if err := json.Compact(&got, []byte(out)); err != nil {
		t.Fatalf("--json printed no JSON: %v\n%s", err, out)
	}
	_ = json.Compact(&exp, want)
	if got.String() != exp.String() {
		t.Errorf("--json changed the report:\n%s", out)
	}
}

func TestExperimentsReportFailures(t *testing.T) {
	t.Parallel()
	srv, _ := reportServer(t)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "a wrong key shows the proxy's message", args: []string{"--url", srv.URL, "--key", "wrong"}, code: 1, want: "answered 401 Unauthorized: invalid API key"},
		{name: "an unreachable proxy", args: []string{"--url", "http://127.0.0.1:1", "--timeout", "2s"}, code: 1, want: "asking http://127.0.0.1:1/factgate/v1/experiments"},
		{name: "not a URL", args: []string{"--url", "127.0.0.1:8080"}, code: 1, want: `--url "127.0.0.1:8080" is not an http(s) URL`},
		{name: "a stray argument", args: []string{"--url", srv.URL, "extra"}, code: 2, want: "unexpected arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := runMain(t, append([]string{"experiments", "report"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.want)
			}
		})
	}
}

func TestExperimentsReportWithoutExperiments(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"confidence":0.95,"experiments":[]}`))
	}))
	defer srv.Close()
	code, out, _ := runMain(t, "experiments", "report", "--url", srv.URL)
	if code != 0 || !strings.Contains(out, "No experiments are configured") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestComparisonVerdicts(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name       string
		c          abtest.Comparison
		test, word string
	}{
		{name: "far in the tail", c: abtest.Comparison{Difference: f(-0.4), Z: f(-6.1), P: f(1e-9)}, test: "z = -6.10   p < 0.0001", word: "lower (significant at 5%)"},
		{name: "higher", c: abtest.Comparison{Difference: f(0.1), Z: f(2.2), P: f(0.0278)}, test: "z = +2.20   p = 0.0278", word: "higher (significant at 5%)"},
		{name: "not significant", c: abtest.Comparison{Difference: f(-0.02), Z: f(-0.5), P: f(0.617)}, test: "z = -0.50   p = 0.6170", word: "no significant difference"},
		{name: "both 0% or both 100%", c: abtest.Comparison{Difference: f(0)}, test: "no test", word: "the rate is 0% (or 100%) in both: no test"},
		{name: "no data", c: abtest.Comparison{}, test: "no test", word: "a variant has no validated answers yet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := formatTest(tc.c); got != tc.test {
				t.Errorf("test %q, want %q", got, tc.test)
			}
			if got := verdict(tc.c); got != tc.word {
				t.Errorf("verdict %q, want %q", got, tc.word)
			}
		})
	}
}
