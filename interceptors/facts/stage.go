package facts

import "github.com/factgate/factgate/interceptors"

// Stage is the facts stage: on for a route with a facts block, and — with the
// defaults — for a route whose validate block implies it, when the route's
// pack has fact rules. A facts block on a route without them is a config
// error. Its Cleanup waits for the jobs and the write-backs in flight.
var Stage = interceptors.Stage{
	Name:  "facts",
	Build: build,
}

func build(b interceptors.BuildContext) (interceptors.Interceptor, error) {
	deps := b.Deps()
	hasRules := deps.Pack != nil && deps.Pack.Facts != nil
	if !b.HasBlock() && (len(b.ImpliedBy()) == 0 || !hasRules) {
		return nil, nil
	}
	var cfg Config
	if err := b.Decode(&cfg); err != nil {
		return nil, err
	}
	f, err := New(cfg, deps)
	if err != nil {
		return nil, err
	}
	return f, nil
}
