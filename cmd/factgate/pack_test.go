package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factgate/factgate/knowledge"
)

// TestBuiltinPackCases runs every built-in pack's example cases as factgate pack
// test does: a built-in pack with a cases folder must pass all of them.
func TestBuiltinPackCases(t *testing.T) {
	t.Parallel()
	tested := 0
	for _, name := range knowledge.BuiltinPackNames {
		dir := filepath.Join("..", "..", "knowledge", "packs", name)
		if _, err := os.Stat(filepath.Join(dir, casesDir)); err != nil {
			continue
		}
		tested++
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := testPackDir(dir, &out, &errOut); code != 0 {
				t.Fatalf("pack test %s: exit %d\n%s%s", dir, code, out.String(), errOut.String())
			}
		})
	}
	if tested == 0 {
		t.Fatal("no built-in pack has cases")
	}
}

// TestPackInitScaffoldsAPackThatPassesItsCases: the scaffold loads, lints and
// passes its own cases; a failing case is exit 1 with a diff; an existing folder
// is never overwritten.
func TestPackInitScaffoldsAPackThatPassesItsCases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"pack", "init", "--dir", dir, "shop"}, &out, &errOut); code != 0 {
		t.Fatalf("pack init: exit %d: %s", code, errOut.String())
	}
	pack := filepath.Join(dir, "shop")
	out.Reset()
	if code := run(t.Context(), []string{"pack", "test", pack}, &out, &errOut); code != 0 {
		t.Fatalf("pack test of the scaffold: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	files, _ := filepath.Glob(filepath.Join(pack, "cases", "*.yaml"))
	lint := append([]string{"knowledge", "lint", filepath.Join(pack, "pack.yaml"), filepath.Join(pack, "rules.yaml")}, files...)
	if code := run(t.Context(), lint, &out, &errOut); code != 0 {
		t.Fatalf("knowledge lint of the scaffold: exit %d: %s", code, errOut.String())
	}
	// A case whose expectation is wrong fails with a diff.
	status := filepath.Join(pack, "cases", "status.yaml")
	b, _ := os.ReadFile(status)
	if err := os.WriteFile(status, bytes.Replace(b, []byte("item.status_mismatch"), []byte("item.unknown"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(t.Context(), []string{"pack", "test", pack}, &out, &errOut); code != 1 {
		t.Fatalf("a wrong expectation: exit %d, want 1\n%s", code, out.String())
	}
	for _, want := range []string{"FAIL  a status the record does not show", "- missing:    item.unknown at itemClaims[0] (Contradiction)", "+ unexpected: item.status_mismatch at itemClaims[0] (Contradiction)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	errOut.Reset()
	if code := run(t.Context(), []string{"pack", "init", "--dir", dir, "shop"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "exists already") {
		t.Errorf("init over an existing folder: exit %d: %s", code, errOut.String())
	}
}

// TestCheckReadsJSONFacts: factgate check with a JSON facts file picks the pack
// that reads records and checks the answer's claims against them.
func TestCheckReadsJSONFacts(t *testing.T) {
	t.Parallel()
	c, err := loadCase(filepath.Join("..", "..", "knowledge", "packs", "orders", "cases", "status.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	answer := filepath.Join(t.TempDir(), "answer.md")
	if err := os.WriteFile(answer, []byte(c.Answer), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, runCheck, "--facts", filepath.Join("..", "..", "knowledge", "packs", "orders", "cases", "orders.json"), "--answer", answer)
	if code != checkFailed {
		t.Fatalf("exit %d (want 1): %s%s", code, stdout, stderr)
	}
	for _, want := range []string{"Contradiction order.status_mismatch", "Order A-1001 is shipped, not delivered.", "knowledge set orders; 3 records (orders)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}
