package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestEveryCommandHasHelp(t *testing.T) {
	for name := range commands {
		args := append(strings.Fields(name), "--help")
		code, out, errOut := runMain(t, args...)
		if code != 0 {
			t.Errorf("%s --help: exit %d", name, code)
		}
		if !strings.Contains(out+errOut, "Usage: factgate "+strings.Fields(name)[0]) {
			t.Errorf("%s --help printed no usage:\n%s%s", name, out, errOut)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	code, _, errOut := runMain(t, "frobnicate")
	if code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, _, errOut = runMain(t, "config")
	if code != 2 || !strings.Contains(errOut, "config check") {
		t.Fatalf("a group without its subcommand: exit %d: %s", code, errOut)
	}
}

func TestDemoRunsWithNothingInstalled(t *testing.T) {
	code, out, errOut := runMain(t, "demo")
	if code != 0 {
		t.Fatalf("demo exit %d:\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"content equals the non-streamed answer: true", `received model "deepseek-chat"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	code, out, _ := runMain(t, "config", "check", "../../configs/factgate.yaml", "../../configs/minimal.yaml")
	if code != 0 || strings.Count(out, ": ok") != 2 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, _ = runMain(t, "config", "check", "testdata/does-not-exist.yaml")
	if code != 1 || !strings.Contains(out, "does-not-exist.yaml") {
		t.Fatalf("missing file: exit %d:\n%s", code, out)
	}
}

func TestBenchInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("bench drives real traffic")
	}
	t.Setenv(envRunAsFactgate, "1") // the mock upstream is a child process
	code, out, errOut := runMain(t, "bench", "--in-process", "--requests", "300", "--rounds", "1", "--concurrency", "8", "--modes", "passthrough,stream,validate")
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"passthrough  direct", "passthrough  proxy", "ratio proxy/direct", "stream       proxy", "validate     proxy"} {
		if !strings.Contains(out, want) {
			t.Fatalf("bench output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "first error") {
		t.Fatalf("bench saw errors:\n%s", out)
	}
}

// TestBenchFaults runs the fault scenarios small: a fault-free mock answers
// everything, a 30% 429 rate without retries does not, and a fallback behind a
// refused primary answers everything.
func TestBenchFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("bench-faults drives real traffic")
	}
	code, out, errOut := runMain(t, "bench-faults", "--requests", "40", "--concurrency", "8")
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	good := func(scenario string) float64 {
		for _, line := range strings.Split(out, "\n") {
			if rest, ok := strings.CutPrefix(line, scenario); ok {
				var pct float64
				if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f%%", &pct); err != nil {
					t.Fatalf("%s: %q: %v", scenario, line, err)
				}
				return pct
			}
		}
		t.Fatalf("no line for %q:\n%s", scenario, out)
		return 0
	}
	if g := good("no faults (baseline)"); g != 100 {
		t.Errorf("without faults %.1f%% good:\n%s", g, out)
	}
	if g := good("429 on a share, retries off"); g >= 100 {
		t.Errorf("the 429s without retries reached no client:\n%s", out)
	}
	if g := good("primary refuses connections, breaker on (default)"); g != 100 {
		t.Errorf("the fallback answered %.1f%%:\n%s", g, out)
	}
}

func TestServeUpstreamFlagErrors(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"main", "want NAME=URL"},
		{"nope=http://127.0.0.1:9090/v1", `no upstream named "nope" (have main)`},
		{"main=ftp://127.0.0.1/v1", "scheme must be http or https"},
	} {
		code, _, errOut := runMain(t, "serve", "--config", "../../configs/factgate.yaml", "--upstream", tc.arg)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("--upstream %s: exit %d: %s", tc.arg, code, errOut)
		}
	}
}
