package revise

import "github.com/factgate/factgate/interceptors"

// Stage is the revise stage (the hidden revision): on for a route with a revise
// block, and — with the defaults — for a route whose validate block implies it.
// The claims block is stripped per the validate stage's strip_claims
// (interceptors.ValidationPolicy), judged by whether the inject stage put the
// contract into the request (Exchange.ContractInjected).
var Stage = interceptors.Stage{
	Name:  "revise",
	Build: build,
}

func build(b interceptors.BuildContext) (interceptors.Interceptor, error) {
	if !b.HasBlock() && len(b.ImpliedBy()) == 0 {
		return nil, nil
	}
	var cfg *Config
	if b.HasBlock() {
		cfg = &Config{}
		if err := b.Decode(cfg); err != nil {
			return nil, err
		}
	}
	opts := Options{ContractInjected: func(ex *interceptors.Exchange) bool { return ex.ContractInjected }}
	if v, ok := b.Stage("validate").(interceptors.ValidationPolicy); ok {
		opts.Strip = StripMode(v.StripClaims())
	}
	r, err := New(cfg, b.Deps(), opts)
	if err != nil {
		return nil, err
	}
	return r, nil
}
