package abtest

import "github.com/factgate/factgate/interceptors"

// Stage is the experiment stage, the outermost of the chain: on for a route
// with an experiment block. It is built last, so it sees which of the route's
// stages are on (inject, validate, revise) and refuses a variant override none
// of them would honour. Its Cleanup waits for the counter writes in flight.
var Stage = interceptors.Stage{
	Name:      "experiment",
	Build:     build,
	Endpoints: endpoints,
}

// endpoints serves the report of every route's experiment at ReportPath.
func endpoints(built func() []interceptors.Interceptor) []interceptors.Endpoint {
	experiments := func() []*Experiment {
		var out []*Experiment
		for _, ic := range built() {
			if e, ok := ic.(*Experiment); ok {
				out = append(out, e)
			}
		}
		return out
	}
	return []interceptors.Endpoint{{Path: ReportPath, Handler: ReportHandler(experiments)}}
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
