package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors/abtest"
)

func init() {
	register("experiments report", "the A/B experiments per variant: rates with 95% intervals, each variant against the control (--url URL)", runExperimentsReport)
}

// Exit statuses of factgate experiments report.
const (
	reportOK     = 0
	reportFailed = 1 // the proxy could not be asked, or answered with an error
	reportUsage  = 2
)

func runExperimentsReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("factgate experiments report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: factgate experiments report [--url URL] [--key KEY] [--route NAME] [--experiment NAME] [--json]

Reads GET /factgate/v1/experiments from a running proxy and prints, per experiment,
one column per variant: requests, the first-draft contradiction rate, the revision,
resolved, downgrade, residual contradiction and error rates (each with its 95%
Wilson interval), mean latency, p95 latency and mean tokens; then each variant
against the control: the difference in percentage points with its 95% interval,
the pooled two-proportion z statistic and its two-sided p-value.

The proxy's auth applies: --key (or FACTGATE_API_KEY) is sent as a bearer token.
--json prints the proxy's JSON instead of the table.
Exit status: 0 printed, 1 the proxy could not be asked or answered an error, 2 usage.

Flags:
`)
		fs.PrintDefaults()
	}
	base := fs.String("url", "http://127.0.0.1:8080", "the proxy's base URL")
	key := fs.String("key", "", "API key for the proxy (default: $FACTGATE_API_KEY)")
	route := fs.String("route", "", "only this route's experiment")
	name := fs.String("experiment", "", "only the experiment with this name")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the proxy")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "factgate experiments report: unexpected arguments %q\n", fs.Args())
		return reportUsage
	}
	if *key == "" {
		*key = os.Getenv("FACTGATE_API_KEY")
	}
	body, err := fetchReport(ctx, *base, *key, *route, *name, *timeout)
	if err != nil {
		fmt.Fprintf(stderr, "factgate experiments report: %v\n", err)
		return reportFailed
	}
	if *asJSON {
		var out bytes.Buffer
		if err := json.Indent(&out, body, "", "  "); err != nil {
			fmt.Fprintf(stderr, "factgate experiments report: the proxy's answer is not JSON: %v\n", err)
			return reportFailed
		}
		out.WriteByte('\n')
		_, _ = stdout.Write(out.Bytes())
		return reportOK
	}
	var rep abtest.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		fmt.Fprintf(stderr, "factgate experiments report: the proxy's answer is not an experiment report: %v\n", err)
		return reportFailed
	}
	writeReport(stdout, rep)
	return reportOK
}

// fetchReport asks the proxy at base for its experiment report.
func fetchReport(ctx context.Context, base, key, route, name string, timeout time.Duration) ([]byte, error) {
	u, err := url.Parse(strings.TrimRight(base, "/") + abtest.ReportPath)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q is not an http(s) URL of the proxy", base)
	}
	q := url.Values{}
	if route != "" {
		q.Set("route", route)
	}
	if name != "" {
		q.Set("experiment", name)
	}
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", u.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := gjson.GetBytes(body, "error.message").Str
		if msg == "" {
			msg = strings.TrimSpace(string(body))
		}
		return nil, fmt.Errorf("%s answered %s: %s", u.Redacted(), resp.Status, msg)
	}
	return body, nil
}

// writeReport prints the report as one table per experiment (a column per
// variant) and the comparisons with the control.
func writeReport(w io.Writer, rep abtest.Report) {
	if len(rep.Experiments) == 0 {
		fmt.Fprintln(w, "No experiments are configured (add an experiment block to a route).")
		return
	}
	for i, er := range rep.Experiments {
		if i > 0 {
			fmt.Fprintln(w)
		}
		writeExperiment(w, er, rep.Confidence)
	}
}

func writeExperiment(w io.Writer, er abtest.ExperimentReport, confidence float64) {
	fmt.Fprintf(w, "Experiment %s · route %s · control %s\n", er.Name, er.Route, er.Control)
	fmt.Fprintf(w, "Rates with %.0f%% Wilson intervals. Forced requests (X-Factgate-Variant) are counted apart.\n", confidence*100)
	if er.Error != "" {
		fmt.Fprintf(w, "warning: %s; the counts may be incomplete\n", er.Error)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	row := func(label string, cell func(v abtest.VariantReport) string) {
		cells := []string{label}
		for _, v := range er.Variants {
			cells = append(cells, cell(v))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	row("", func(v abtest.VariantReport) string {
		if v.Control {
			return v.Name + " (control)"
		}
		return v.Name
	})
	row("weight", func(v abtest.VariantReport) string { return fmt.Sprintf("%g (%.0f%%)", v.Weight, v.Share*100) })
	row("requests", func(v abtest.VariantReport) string { return fmt.Sprint(v.Requests) })
	row("forced (not counted)", func(v abtest.VariantReport) string { return fmt.Sprint(v.ForcedRequests) })
	row("validated drafts", func(v abtest.VariantReport) string { return fmt.Sprint(v.Validated) })
	row("first-draft contradiction", func(v abtest.VariantReport) string { return formatRate(v.Rates.FirstDraftContradiction) })
	row("revised", func(v abtest.VariantReport) string { return formatRate(v.Rates.Revision) })
	row("resolved (of triggered)", func(v abtest.VariantReport) string { return formatRate(v.Rates.Resolved) })
	row("downgraded", func(v abtest.VariantReport) string { return formatRate(v.Rates.Downgrade) })
	row("residual contradiction", func(v abtest.VariantReport) string { return formatRate(v.Rates.ResidualContradiction) })
	row("upstream errors", func(v abtest.VariantReport) string { return formatRate(v.Rates.Error) })
	row("hidden calls", func(v abtest.VariantReport) string { return fmt.Sprint(v.Revisions) })
	row("mean latency", func(v abtest.VariantReport) string { return formatMillis(v.Latency.Mean, "") })
	row("p95 latency", func(v abtest.VariantReport) string {
		if v.Latency.P95AtMost == nil && v.Requests > 0 {
			return "> " + formatMillis(lastBound(v.Latency.Buckets), "")
		}
		return formatMillis(v.Latency.P95AtMost, "≤ ")
	})
	row("mean tokens", func(v abtest.VariantReport) string {
		if v.Tokens.Mean == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f", *v.Tokens.Mean)
	})
	_ = tw.Flush()

	if len(er.Comparisons) == 0 {
		return
	}
	fmt.Fprintf(w, "\nAgainst the control %s (variant − control, %.0f%% Newcombe interval; pooled two-proportion z-test):\n", er.Control, confidence*100)
	tw = tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range er.Comparisons {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Variant, metricLabel(c.Metric), formatDifference(c), formatTest(c), verdict(c))
	}
	_ = tw.Flush()
}

// metricLabel names a compared metric as the table does.
func metricLabel(m string) string {
	switch m {
	case abtest.MetricFirstDraftContradiction:
		return "first-draft contradiction"
	case abtest.MetricRevision:
		return "revised"
	case abtest.MetricResidualContradiction:
		return "residual contradiction"
	}
	return m
}

// formatRate renders "31.6% [25.5, 38.4]", or "-" without data.
func formatRate(r abtest.Rate) string {
	if r.Value == nil || r.Low == nil || r.High == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%% [%.1f, %.1f]", *r.Value*100, *r.Low*100, *r.High*100)
}

// formatDifference renders "-15.3 pp [-23.0, -7.4]", or "no data".
func formatDifference(c abtest.Comparison) string {
	if c.Difference == nil || c.Low == nil || c.High == nil {
		return "no data"
	}
	return fmt.Sprintf("%+.1f pp [%+.1f, %+.1f]", *c.Difference*100, *c.Low*100, *c.High*100)
}

// formatTest renders "z = -3.12  p = 0.0018" ("p < 0.0001" in the far tail).
func formatTest(c abtest.Comparison) string {
	if c.Z == nil || c.P == nil {
		return "no test"
	}
	if *c.P < 0.0001 {
		return fmt.Sprintf("z = %+.2f   p < 0.0001", *c.Z)
	}
	return fmt.Sprintf("z = %+.2f   p = %.4f", *c.Z, *c.P)
}

// verdict reads the test at the 5% level.
func verdict(c abtest.Comparison) string {
	switch {
	case c.Difference == nil:
		return "a variant has no validated answers yet"
	case c.P == nil:
		return "the rate is 0% (or 100%) in both: no test"
	case *c.P >= 0.05:
		return "no significant difference"
	case *c.Difference < 0:
		return "lower (significant at 5%)"
	default:
		return "higher (significant at 5%)"
	}
}

// formatMillis renders milliseconds as "850 ms" or "2.35 s", with a prefix; "-"
// for nil.
func formatMillis(ms *float64, prefix string) string {
	switch {
	case ms == nil || math.IsNaN(*ms):
		return "-"
	case *ms < 1000:
		return fmt.Sprintf("%s%.0f ms", prefix, *ms)
	default:
		return fmt.Sprintf("%s%.2f s", prefix, *ms/1000)
	}
}

// lastBound is the largest bounded latency bucket's bound.
func lastBound(buckets []abtest.LatencyBucket) *float64 {
	for i := len(buckets) - 1; i >= 0; i-- {
		if buckets[i].UpTo != nil {
			return buckets[i].UpTo
		}
	}
	return nil
}
