package validate

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
)

// FuzzCheck: any answer text gives sorted, complete issues, the same twice, and no
// panic — against the facts of the small test log.
func FuzzCheck(f *testing.F) {
	for _, c := range loadCases(f) {
		f.Add(c.Answer)
	}
	f.Add(answer(unitClaims(unit("200", "Alice", "AlliedMCV", "confirmed", "power|1:10|SpecialPower_UnpackReplaceSelf|200", "select|99999:00|200"))))
	f.Add(answer(`{"unitClaims":[{"unitId":"-1","player":"","claim":"","evidence":"power|x|y|z"}],"eventClaims":{},"timelineClaims":[null]}`))
	env := newEnv(f, Config{}, testLog)
	f.Fuzz(func(t *testing.T, content string) {
		issues := env.checker.Check(content, env.input)
		again := env.checker.Check(content, env.input)
		if !slices.Equal(keys(issues, interceptors.Info), keys(again, interceptors.Info)) {
			t.Fatal("two checks of one answer differ")
		}
		// With the request's claims.Locations: the first check records where the
		// block is, the second reuses it; both give what a check without does.
		in := env.input
		in.Locations = &claims.Locations{}
		for range 2 {
			if got := env.checker.Check(strings.Clone(content), in); !reflect.DeepEqual(got, issues) {
				t.Fatalf("with Locations the issues are %v, without %v", keys(got, interceptors.Info), keys(issues, interceptors.Info))
			}
		}
		for i, is := range issues {
			if is.Code == "" || is.Message == "" || is.Severity < interceptors.Info || is.Severity > interceptors.Fatal {
				t.Fatalf("incomplete issue %+v", is)
			}
			if i > 0 {
				a, b := parsePathKey(issues[i-1].Path), parsePathKey(is.Path)
				if c := a.compare(b); c > 0 || (c == 0 && issues[i-1].Code > is.Code) {
					t.Fatalf("out of order: %s %s before %s %s", issues[i-1].Path, issues[i-1].Code, is.Path, is.Code)
				}
			}
		}
	})
}
