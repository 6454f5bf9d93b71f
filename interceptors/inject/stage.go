package inject

import "github.com/factgate/factgate/interceptors"

// Stage is the inject stage: on for a route with an inject block (even empty:
// `inject: {}`). The contract's auto mode follows the validate stage's policy
// (interceptors.ValidationPolicy): the contract goes in when the route
// validates, or may when it has a validate block an A/B variant can switch on.
var Stage = interceptors.Stage{
	Name:  "inject",
	Build: build,
}

func build(b interceptors.BuildContext) (interceptors.Interceptor, error) {
	if !b.HasBlock() {
		return nil, nil
	}
	cfg := &Config{}
	if err := b.Decode(cfg); err != nil {
		return nil, err
	}
	v, ok := b.Stage("validate").(interceptors.ValidationPolicy)
	cfg.RouteHasValidator = ok
	cfg.RouteValidates = ok && v.Validates()
	in, err := New(cfg, b.Deps())
	if err != nil {
		return nil, err
	}
	return in, nil
}
