package interceptors

import "encoding/json"

// traceFields is Trace without its methods, so that json.Marshal of it encodes
// the fields by their tags instead of calling MarshalJSON again.
type traceFields Trace

// MarshalJSON renders the trace, under its lock, with encoding/json: the JSON
// GET /factgate/v1/traces/{id} returns (docs/revision.md). A hand-written encoder
// wrote the same bytes until issue 29 measured what it bought
// (docs/performance.md, "Kept engines").
func (t *Trace) MarshalJSON() ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return json.Marshal((*traceFields)(t))
}
