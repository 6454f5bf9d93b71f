package validate

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// decodeRoute decodes a route's blocks strictly, as proxy.ParseConfig does.
func decodeRoute(src string) (*Config, error) {
	var route struct {
		Validate *Config `yaml:"validate"`
	}
	dec := yaml.NewDecoder(bytes.NewReader([]byte(src)))
	dec.KnownFields(true)
	if err := dec.Decode(&route); err != nil {
		return nil, err
	}
	if route.Validate != nil {
		if err := route.Validate.Validate(); err != nil {
			return nil, err
		}
	}
	return route.Validate, nil
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		yaml string
		want Settings
		err  string
	}{
		{name: "an empty block is the default", yaml: "validate: {}",
			want: Settings{Enabled: true, RequireClaims: true, TimeTolerance: 500 * time.Millisecond, MaxFactsPerIssue: 8, StripClaims: StripAuto}},
		{name: "every key", yaml: "validate:\n  enabled: false\n  require_claims: false\n  time_tolerance: 0s\n  max_facts_per_issue: 3\n  strip_claims: never\n",
			want: Settings{Enabled: false, RequireClaims: false, TimeTolerance: 0, MaxFactsPerIssue: 3, StripClaims: StripNever}},
		{name: "a tolerance in readable units", yaml: "validate: {time_tolerance: 1500ms, strip_claims: always}",
			want: Settings{Enabled: true, RequireClaims: true, TimeTolerance: 1500 * time.Millisecond, MaxFactsPerIssue: 8, StripClaims: StripAlways}},
		{name: "an unknown key is named", yaml: "validate: {tolerance: 1s}", err: "tolerance"},
		{name: "a bare number is not a duration", yaml: "validate: {time_tolerance: 5}", err: "bad duration"},
		{name: "an unknown strip mode", yaml: "validate: {strip_claims: sometimes}", err: `"sometimes"`},
		{name: "a tolerance too wide to mean anything", yaml: "validate: {time_tolerance: 1m}", err: "time_tolerance: 1m0s is more than"},
		{name: "a negative facts bound", yaml: "validate: {max_facts_per_issue: -1}", err: "max_facts_per_issue: -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := decodeRoute(tc.yaml)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg == nil {
				t.Fatal("the block decoded to nil")
			}
			if got := cfg.Settings(); got != tc.want {
				t.Fatalf("settings %+v, want %+v", got, tc.want)
			}
		})
	}
}
