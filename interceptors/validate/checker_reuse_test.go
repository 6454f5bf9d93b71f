package validate

import (
	"reflect"
	"testing"

	"github.com/factgate/factgate/interceptors"
)

// Check reads the claims into the parser's reused buffers: the issues it
// returns must hold nothing of them, so checking other answers afterwards
// leaves them as they were.
func TestCheckIssuesOutliveLaterChecks(t *testing.T) {
	t.Parallel()
	env := newEnv(t, Config{}, testLog)
	cases := loadCases(t)
	kept := make([][]interceptors.Issue, len(cases))
	flagged := 0
	for i, c := range cases {
		kept[i] = env.checker.Check(c.Answer, env.input)
		flagged += len(kept[i])
	}
	if flagged == 0 {
		t.Fatal("the cases raise no issues: nothing to compare")
	}
	for i := len(cases) - 1; i >= 0; i-- { // the other answers, in the other order
		if want := env.checker.Check(cases[i].Answer, env.input); !reflect.DeepEqual(kept[i], want) {
			t.Fatalf("%s: the issues changed after later checks:\n%+v\nwant %+v", cases[i].ID, kept[i], want)
		}
	}
}
