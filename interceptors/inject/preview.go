package inject

import (
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// Preview returns the system prompt the stage injects into a request whose
// context resolved to set and scopes, with a variant's overrides (the zero value:
// the route's own settings) — the same bytes OnRequest puts at the front of the
// messages, before any client system message is merged under them. set may be nil
// when the route or the overrides use a custom prompt. It is what the console
// shows as "the rendered prompt for a context"; a test holds it equal to what the
// upstream receives.
func (in *Injector) Preview(set *knowledge.Set, scopes knowledge.Scopes, ov interceptors.Overrides) string {
	parts := Parts{AdditionalRules: in.s.rules}
	if ov.AdditionalRules != nil {
		parts.AdditionalRules = *ov.AdditionalRules
	}
	switch {
	case ov.CustomPrompt != nil:
		parts.Knowledge = *ov.CustomPrompt
	case in.s.useCustom:
		parts.Knowledge = in.s.custom
	case set != nil:
		parts.Knowledge = in.lib.Renderer().Render(set, scopes)
	}
	if in.contractOn(&interceptors.Exchange{Overrides: ov}) {
		parts.Contract = in.contract
	}
	return Compose(parts)
}
