package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/factgate/factgate/cmd/factgate/internal/loadbench"
)

// envRunAsFactgate makes the test binary behave as the factgate binary.
const envRunAsFactgate = "FACTGATE_TEST_RUN_AS_FACTGATE"

// TestMain lets the test binary stand in for factgate: bench starts
// "factgate mock-upstream" and "factgate serve" from os.Executable, which in a test
// is this binary, so a child started with envRunAsFactgate=1 runs the command its
// arguments name instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv(envRunAsFactgate) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// TestBenchChildren runs bench small with the mock and the proxy as children: it
// prints medians, ratios and both processes' RSS per mode, the validating route
// validated every answer, the memory check ran, and the proxy child flushed its
// profiles when it was stopped.
func TestBenchChildren(t *testing.T) {
	if testing.Short() {
		t.Skip("bench drives real traffic")
	}
	t.Setenv(envRunAsFactgate, "1")
	dir := t.TempDir()
	cpu, heap := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "heap.pprof")
	code, out, errOut := runMain(t, "bench", "--requests", "200", "--rounds", "2", "--concurrency", "4", "--warmup", "20",
		"--modes", "passthrough,validate", "--rss-requests", "50", "--cpu-profile", cpu, "--mem-profile", heap)
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"mock upstream 127.0.0.1:", "proxy memory budget: ",
		"passthrough  direct", "passthrough  proxy", "passthrough  ratio proxy/direct: req/s ",
		"validate     direct", "validate     proxy", "validate     ratio proxy/direct: req/s ",
		"400 of 400 proxy answers validated",
		"validate     target req/s ≥ 0.5x direct: ", "validate     target p99 ≤ 2.0x direct's: ",
		"passthrough  RSS after the mode: proxy ", "validate     RSS after the mode: proxy ", "MB), mock ",
		"after 50: proxy ", "after 100: proxy ", "configured budgets: ", "target RSS ≤ 64 MB + budgets",
		"target RSS flat over the second 50",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q", want)
		}
	}
	if strings.Contains(out, "first error") {
		t.Errorf("bench saw errors")
	}
	// Every target row ends with its error count, and it is 0.
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if !slices.Contains(loadbench.ModeNames, f0(f)) || len(f) < 3 || (f[1] != "direct" && f[1] != "proxy") {
			continue
		}
		rows++
		if f[len(f)-1] != "0" {
			t.Errorf("errors in %q", line)
		}
	}
	if rows != 4 {
		t.Errorf("%d target rows, want 4", rows)
	}
	for _, p := range []string{cpu, heap} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v", p, err)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s\n%s", out, errOut)
	}
}

// f0 is the first field, or "".
func f0(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// TestBenchNetHTTPClient drives the validating route with net/http, as hey does:
// every answer validated, no errors; an unknown client is refused.
func TestBenchNetHTTPClient(t *testing.T) {
	if testing.Short() {
		t.Skip("bench drives real traffic")
	}
	t.Setenv(envRunAsFactgate, "1")
	code, out, errOut := runMain(t, "bench", "--requests", "100", "--rounds", "1", "--concurrency", "4", "--warmup", "10",
		"--modes", "validate", "--client", "net/http")
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"load driver: 4 connections, net/http client", "100 of 100 proxy answers validated", "validate     target req/s ≥ 0.5x direct: "} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "first error") {
		t.Errorf("bench saw errors:\n%s", out)
	}
	if code, _, errOut := runMain(t, "bench", "--client", "curl"); code != 2 || !strings.Contains(errOut, `unknown --client "curl"`) {
		t.Errorf("--client curl: exit %d, %q", code, errOut)
	}
}
