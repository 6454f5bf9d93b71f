package reqcontext

import (
	"errors"

	"github.com/factgate/factgate/interceptors"
)

// Stage is the context stage: on for every route with a pack, with or without
// its context block (the route's defaults). A context block on a route without
// a pack is a config error.
var Stage = interceptors.Stage{
	Name:  "context",
	Build: build,
}

func build(b interceptors.BuildContext) (interceptors.Interceptor, error) {
	deps := b.Deps()
	if deps.Pack == nil {
		if b.HasBlock() {
			return nil, errors.New("a context block needs the route's pack (set pack)")
		}
		return nil, nil
	}
	var cfg *Config
	if b.HasBlock() {
		cfg = &Config{}
		if err := b.Decode(cfg); err != nil {
			return nil, err
		}
	}
	r, err := New(cfg, deps)
	if err != nil {
		return nil, err
	}
	return r, nil
}
