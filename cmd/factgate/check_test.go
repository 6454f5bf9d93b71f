package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checkData names a file of testdata/check (copies of the RA3 fixtures).
func checkData(name string) string { return filepath.Join("testdata", "check", name) }

func TestCheckText(t *testing.T) {
	code, out, errOut := runMain(t, "check", "--facts", checkData("allied_vs_soviet.txt"), "--answer", checkData("c03_answer.txt"))
	if code != 1 {
		t.Fatalf("exit %d, want 1 (a Contradiction):\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one issue line and a summary:\n%s", out)
	}
	if f := strings.Fields(lines[0]); len(f) < 4 || f[0] != "Contradiction" || f[1] != "power.not_used" || f[2] != "unitClaims[0].evidence[0]" || !strings.Contains(lines[0], "UnitId 301") {
		t.Fatalf("issue line %q", lines[0])
	}
	for _, want := range []string{"1 issue (C1)", "knowledge set ra3", "players PlayerA (盟军), PlayerB (苏联)", "facts end at 14:32.40"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("summary %q lacks %q", lines[1], want)
		}
	}
}

func TestCheckJSON(t *testing.T) {
	code, out, errOut := runMain(t, "check", "--format", "json", "--facts", checkData("allied_vs_soviet.txt"), "--answer", checkData("c03_answer.txt"))
	if code != 1 {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	var doc map[string][]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(doc) != 1 || len(doc["issues"]) != 1 {
		t.Fatalf("want exactly {\"issues\":[one]}:\n%s", out)
	}
	is := doc["issues"][0]
	var fields []string
	for k := range is {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	if !slices.Equal(fields, []string{"code", "message", "path", "recommendation", "severity"}) {
		t.Fatalf("fields %v", fields)
	}
	for field, want := range map[string]string{"code": `"power.not_used"`, "severity": `"Contradiction"`, "path": `"unitClaims[0].evidence[0]"`} {
		if string(is[field]) != want {
			t.Errorf("%s = %s, want %s", field, is[field], want)
		}
	}
	var rec map[string]any
	if err := json.Unmarshal(is["recommendation"], &rec); err != nil || rec["evidenceLevel"] != "uncertain" || rec["text"] == "" {
		t.Errorf("recommendation %s", is["recommendation"])
	}
}

func TestCheckSessionAndFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"three segments of one session are merged", []string{"--facts", checkData("allied_vs_soviet.part1.txt"), "--facts", checkData("allied_vs_soviet.part2.txt"),
			"--facts", checkData("allied_vs_soviet.part3.txt"), "--answer", checkData("c17_answer.txt")}, 0, "no issues"},
		{"the last segment alone", []string{"--facts", checkData("allied_vs_soviet.part3.txt"), "--answer", checkData("c17_answer.txt")}, 1, "power.not_used"},
		{"a wider tolerance accepts a citation 3 s off", []string{"--tolerance", "4s", "--facts", checkData("allied_vs_soviet.txt"), "--answer", checkData("c04_answer.txt")}, 0, "no issues"},
		{"the default tolerance does not", []string{"--facts", checkData("allied_vs_soviet.txt"), "--answer", checkData("c04_answer.txt")}, 1, "evidence.not_in_replay"},
		{"a missing block is Fatal", []string{"--facts", checkData("allied_vs_soviet.txt"), "--answer", checkData("c09_answer.txt")}, 1, "Fatal         claims.missing"},
		{"or a Warning with --optional-claims", []string{"--optional-claims", "--facts", checkData("allied_vs_soviet.txt"), "--answer", checkData("c09_answer.txt")}, 0, "Warning       claims.missing"},
		{"factions given in player order", []string{"--factions", "苏联,盟军", "--facts", checkData("allied_vs_soviet.txt"), "--answer", checkData("c03_answer.txt")}, 1, "PlayerA (苏联), PlayerB (盟军)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runMain(t, append([]string{"check"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.says) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s%s", code, tc.code, tc.says, out, errOut)
			}
		})
	}
}

func TestCheckBadInput(t *testing.T) {
	dir := t.TempDir()
	// A 50 MB log (sparse: nothing is written or read) is refused before reading.
	huge := filepath.Join(dir, "huge.txt")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(50 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	garbage := filepath.Join(dir, "garbage.bin")
	g := make([]byte, 1<<16)
	for i := range g {
		g[i] = byte(i*131 + i>>5)
	}
	if err := os.WriteFile(garbage, g, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"50 MB of facts", []string{"--facts", huge, "--answer", checkData("c03_answer.txt")}, 2, "", "52428800 bytes is too large; the limit is 16777216 bytes (16 MiB)"},
		{"binary garbage has no facts: only format rules", []string{"--facts", garbage, "--answer", checkData("c03_answer.txt")}, 0, "no facts", ""},
		{"binary garbage as the answer", []string{"--facts", checkData("allied_vs_soviet.txt"), "--answer", garbage}, 1, "claims.missing", ""},
		{"no flags", nil, 2, "", "Usage: factgate check"},
		{"no answer", []string{"--facts", checkData("allied_vs_soviet.txt")}, 2, "", "Usage: factgate check"},
		{"a missing file", []string{"--facts", filepath.Join(dir, "nope.txt"), "--answer", checkData("c03_answer.txt")}, 2, "", "nope.txt"},
		{"an unknown format", []string{"--format", "xml", "--facts", checkData("allied_vs_soviet.txt"), "--answer", checkData("c03_answer.txt")}, 2, "", `--format "xml"`},
		{"a bare-number tolerance", []string{"--tolerance", "5", "--facts", checkData("allied_vs_soviet.txt"), "--answer", checkData("c03_answer.txt")}, 2, "", "bad duration"},
		{"an unknown set", []string{"--set", "ra4", "--facts", checkData("allied_vs_soviet.txt"), "--answer", checkData("c03_answer.txt")}, 2, "", `"ra4"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runMain(t, append([]string{"check"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout (want %q):\n%s\nstderr (want %q):\n%s", code, tc.code, tc.stdout, out, tc.stderr, errOut)
			}
		})
	}
}

func TestCheckReadsTheAnswerFromStdin(t *testing.T) {
	f, err := os.Open(checkData("c03_answer.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stdin := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = stdin }()
	code, out, errOut := runMain(t, "check", "--facts", checkData("allied_vs_soviet.txt"), "--answer", "-")
	if code != 1 || !strings.Contains(out, "power.not_used") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
}
