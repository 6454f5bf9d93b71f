package validate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/facts"
)

// TestStageIgnoresATruncatedIndex: when the facts stage cut the operation log at its
// max_bytes bound, the validate stage does not check citations against the cut
// index (every citation past the cut would look "not in the replay"): the rules
// that need facts are off, the trace says validation was incomplete and why, and
// the answer passes. With the whole log, the same answer has its Contradiction.
func TestStageIgnoresATruncatedIndex(t *testing.T) {
	t.Parallel()
	var padding strings.Builder
	for i := range 200 {
		fmt.Fprintf(&padding, "5:%02d.00 Boris 选择 [UnitId]%d\n", i%60, 900+i)
	}
	log := testLog + padding.String() // well over 4 KiB
	tests := []struct {
		name       string
		maxBytes   string
		want       []string
		incomplete bool
	}{
		{name: "whole log: the citation is checked", maxBytes: "", want: []string{"power.not_used|Contradiction|unitClaims[0].evidence[0]"}},
		{name: "log cut at max_bytes: fact rules off", maxBytes: "4KiB", want: []string{}, incomplete: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var cfg facts.Config
			if tc.maxBytes != "" {
				if err := cfg.MaxBytes.UnmarshalText([]byte(tc.maxBytes)); err != nil {
					t.Fatal(err)
				}
			}
			fx, err := facts.New(cfg, interceptors.Deps{Route: "analyst", Pack: ra3Pack(t)})
			if err != nil {
				t.Fatal(err)
			}
			v, _ := newStage(t, Config{})
			ctx := context.Background()
			ex := newExchange(log)
			if err := fx.OnRequest(ctx, ex); err != nil {
				t.Fatal(err)
			}
			if err := v.OnRequest(ctx, ex); err != nil {
				t.Fatal(err)
			}
			ex.Response = completion(c03Answer)
			before := string(ex.Response.Body)
			if err := v.OnResponse(ctx, ex); err != nil {
				t.Fatalf("the stage failed the request: %v", err)
			}
			if got := keys(ex.Issues, interceptors.Info); !slices.Equal(got, tc.want) {
				t.Fatalf("issues %v, want %v", got, tc.want)
			}
			var incomplete bool
			var notes []string
			ex.Trace.Do(func(tr *interceptors.Trace) { incomplete, notes = tr.ValidationIncomplete, tr.Notes })
			if incomplete != tc.incomplete {
				t.Fatalf("validation_incomplete = %v, want %v; notes %q", incomplete, tc.incomplete, notes)
			}
			if tc.incomplete && !strings.Contains(strings.Join(notes, "\n"), "exceeds the fact extraction bound") {
				t.Fatalf("the trace does not say why the fact rules are off: %q", notes)
			}
			if string(ex.Response.Body) != before {
				t.Fatal("the answer changed")
			}
		})
	}
}
