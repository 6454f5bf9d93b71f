package validate

import "github.com/factgate/factgate/interceptors"

// Stage is the validate stage: on for a route with a validate block, even one
// switched off (enabled: false), since an A/B variant may turn validation on.
// Its block implies facts (the index claims are checked against) and revise
// (the hidden revision of a flagged draft). What it built exports
// interceptors.ValidationPolicy to the stages outside it.
var Stage = interceptors.Stage{
	Name:    "validate",
	Implies: []string{"facts", "revise"},
	Build:   build,
}

func build(b interceptors.BuildContext) (interceptors.Interceptor, error) {
	if !b.HasBlock() {
		return nil, nil
	}
	var cfg Config
	if err := b.Decode(&cfg); err != nil {
		return nil, err
	}
	v, err := New(cfg, b.Deps())
	if err != nil {
		return nil, err
	}
	return v, nil
}

// Validates implements interceptors.ValidationPolicy: the validate block's
// enabled.
func (v *Validate) Validates() bool { return v.settings.Enabled }

// StripClaims implements interceptors.ValidationPolicy: the validate block's
// strip_claims.
func (v *Validate) StripClaims() string { return string(v.settings.StripClaims) }

var _ interceptors.ValidationPolicy = (*Validate)(nil)
