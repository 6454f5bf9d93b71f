package abtest

import "github.com/factgate/factgate/interceptors"

// Stage is the experiment stage, the outermost of the chain: on for a route
// with an experiment block. It is built last, so it sees which of the route's
// stages are on (inject, validate, revise) and refuses a variant override none
// of them would honour. Its Cleanup waits for the counter writes in flight.
var Stage = interceptors.Stage{
	Name:  "experiment",
	Build: build,
}

func build(b interceptors.BuildContext) (interceptors.Interceptor, error) {
	if !b.HasBlock() {
		return nil, nil
	}
	var cfg Config
	if err := b.Decode(&cfg); err != nil {
		return nil, err
	}
	e, err := New(cfg, b.Deps(), b)
	if err != nil {
		return nil, err
	}
	return e, nil
}
