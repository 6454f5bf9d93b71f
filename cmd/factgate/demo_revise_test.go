package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestDemoTellsTheRevisionStory(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, runDemo)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, story, ok := strings.Cut(stdout, "4. The hidden revision")
	if !ok {
		t.Fatalf("the demo has no revision section:\n%s", stdout)
	}
	for _, want := range []string{
		"Contradiction timeline.before_production unitClaims[0]",
		"evidence.ambiguous",
		"| 1. UnitId 733 在 6:02.00 就已出现",
		"| 6:02.00 PlayerA 选择 [UnitId]733",
		"X-Factgate-Revisions: 1",
		"X-Factgate-Issues:    draft=C1,E2;final=0",
		`outcome "resolved"`,
		"/factgate/v1/traces/",
		"f) Streamed, the client receives the same clean answer: true",
	} {
		if !strings.Contains(story, want) {
			t.Errorf("the revision section lacks %q:\n%s", want, story)
		}
	}
	// The client's answer is the correction, without the claims block or the draft's error.
	_, received, _ := strings.Cut(story, "e) What the client received")
	received, _, _ = strings.Cut(received, "X-Factgate-Revisions")
	if strings.Contains(received, "[机器可读声明]") || strings.Contains(received, "出动世纪轰炸机 733") || !strings.Contains(received, "733 可能就是它") {
		t.Errorf("the client's answer is not the clean correction:\n%s", received)
	}
}

func TestDemoTellsTheOrdersStory(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return runDemo(ctx, []string{"--pack", "orders"}, stdout, stderr)
	})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"Contradiction order.status_mismatch    orderClaims[0]  Order A-1001 is shipped, not delivered.",
		"| 1. Order A-1001 is shipped, not delivered.",
		"| orders A-1001: channel web, currency EUR, items Trail shoes, placed 2026-03-01, region EU, shipped 2026-03-03, status shipped, total 59.90",
		"X-Factgate-Revisions: 1",
		"X-Factgate-Issues:    draft=C1;final=0;delivered=0",
		`outcome "resolved"`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the story lacks %q:\n%s", want, stdout)
		}
	}
	_, received, _ := strings.Cut(stdout, "5. What the customer received")
	received, _, _ = strings.Cut(received, "X-Factgate-Revisions")
	if strings.Contains(received, "[machine-readable claims]") || strings.Contains(received, "were delivered") || !strings.Contains(received, "are on their way") {
		t.Errorf("the customer's answer is not the clean correction:\n%s", received)
	}
}
