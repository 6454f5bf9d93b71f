package semantic

import (
	"errors"

	"github.com/factgate/factgate/interceptors"
)

// Stage is the semantic stage: on for a route with a semantic block, which
// requires the validate block — validation runs the semantic validators after
// the deterministic ones. Whether it registers its validators follows the
// validate stage's policy (interceptors.ValidationPolicy).
var Stage = interceptors.Stage{
	Name:     "semantic",
	Requires: []string{"validate"},
	Build:    build,
}

func build(b interceptors.BuildContext) (interceptors.Interceptor, error) {
	if !b.HasBlock() {
		return nil, nil
	}
	var cfg Config
	if err := b.Decode(&cfg); err != nil {
		return nil, err
	}
	v, ok := b.Stage("validate").(interceptors.ValidationPolicy)
	if !ok {
		// Stage.Requires makes the proxy refuse such a route first.
		return nil, errors.New("a semantic block needs the route's validate block: validation runs the semantic validators after the deterministic ones")
	}
	cfg.RouteValidates = v.Validates()
	s, err := New(cfg, b.Deps())
	if err != nil {
		return nil, err
	}
	return s, nil
}
