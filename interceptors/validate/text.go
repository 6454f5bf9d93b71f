package validate

import (
	"strings"
	"text/template"

	"github.com/factgate/factgate/interceptors"
)

// englishText is the fallback message and recommendation of each code, used when
// the pack has no template for it. Templates run over the issue (.Args.unit...),
// like the pack's own.
var englishText = func() map[string][2]*template.Template {
	texts := map[string][2]string{
		"claims.missing": {
			"The answer has no machine-readable claims block.",
			"End the answer with {{or .Args.marker \"the claims marker\"}} followed by the claims object in a ```json block.",
		},
		"claims.json_invalid": {
			"The claims block is not valid JSON{{with .Args.error}} ({{.}}){{end}}.",
			"Output one valid JSON object with the arrays unitClaims, eventClaims and timelineClaims.",
		},
		"claims.root_not_object": {
			"The claims block is {{with .Args.got}}a JSON {{.}}, {{end}}not a JSON object.",
			"The top level must be an object with the arrays unitClaims, eventClaims and timelineClaims.",
		},
		"claims.truncated": {
			"{{.Args.list}} has {{.Args.count}} claims, more than the cap of {{.Args.cap}}; the rest were dropped.",
			"Write at most {{.Args.cap}} claims in {{.Args.list}}, the most important ones.",
		},
		"claims.field_alias": {
			`The event claim uses the field "{{or .Args.alias "event"}}" instead of "{{or .Args.field "claim"}}".`,
			`Write the claim in the field "{{or .Args.field "claim"}}".`,
		},
		"claims.unknown_evidence_level": {
			`{{if .Args.level}}The evidence level "{{.Args.level}}" is not known{{else}}The claim has no evidence level{{end}}; it is treated as uncertain.`,
			"Use one of confirmed, highly likely, possible, uncertain, ruled out.",
		},
		"evidence.unstructured": {
			`The evidence "{{.Args.evidence}}" is not in the structured form type|time|parameters and cannot be checked against the facts.`,
			"Write each evidence item as the structured form of the fact it cites: type|time|parameters.",
		},
		"unit.missing_id": {
			"A unit claim{{with .Args.claim}} ({{.}}){{end}} has no unitId.",
			"Give the unitId (the number in the log), or drop the claim.",
		},
		"unit.missing_claim": {
			"The claim about UnitId {{.Args.unit}} does not say what the unit is.",
			"Name the asset in claim, or drop the claim.",
		},
		CodeRuleError: {
			"The rule {{.Args.rule}} could not check this claim ({{.Args.error}}).",
			"Nothing to change because of it; the pack's rule needs fixing.",
		},
		"claims.missing_field": {
			"A claim in {{.Args.kind}}{{with .Args.claim}} ({{.}}){{end}} has no usable {{.Args.field}}.",
			"Give {{.Args.field}} as the claims contract describes it, or drop the claim.",
		},
		CodeNoEvidence: {
			`The claim "{{.Args.claim}}" is {{.Args.level}} but gives no evidence.`,
			"Add structured evidence from the log; without evidence, lower the level to possible or uncertain.",
		},
		CodeNoAlternatives: {
			"UnitId {{.Args.unit}} is claimed as {{.Args.claim}} ({{.Args.level}}) without alternatives or what needs confirmation.",
			"List the other candidate assets in alternatives, or say in needsConfirmation what would confirm the claim.",
		},
		CodeSegmentsMissing: {
			"{{.Args.missing}} part(s) of this session's log are no longer available, so the answer could not be checked against the whole log.",
			"Keep claims that rest on the missing parts at a lower evidence level, or ask for the log to be sent again.",
		},
		CodeSessionUnconfirmed: {
			"The list of this session's log parts could not be read from the shared cache, so parts sent through other replicas may be missing and the answer was not checked against the log.",
			"Keep claims that rest on earlier parts of the log at a lower evidence level, or send the whole log again.",
		},
		CodeUnitNotObserved: {
			"UnitId {{.Args.unit}} never appears in the log.",
			"Only make claims about UnitIds that appear in the log; drop the claim or use the right UnitId.",
		},
		CodeNotInReplay: {
			`The evidence "{{.Args.evidence}}" matches no operation in the log{{with .Args.time}} (nothing like it near {{.}}){{end}}.`,
			"Cite only lines that exist in the log, copying their time and parameters; drop this evidence and adjust the claim.",
		},
		CodeOutOfRange: {
			`The evidence "{{.Args.evidence}}" is at {{.Args.time}}, after the end of the replay{{with .Args.end}} ({{.}}){{end}}.`,
			"Drop this evidence; cite only operations within the replay.",
		},
		CodePowerNotUsed: {
			"UnitId {{.Args.unit}} never used {{.Args.power}}{{if .Args.used}} (it used: {{.Args.used}}){{else}} (it used no special power){{end}}.",
			`Drop the evidence "{{.Args.evidence}}" and judge UnitId {{.Args.unit}} by what it actually did.`,
		},
		CodePlayerMismatch: {
			"UnitId {{.Args.unit}} does not belong to {{.Args.player}}{{with .Args.owner}}; it appears on the lines of {{.}}{{end}}.",
			"Set player to the UnitId's actual owner{{with .Args.owner}} ({{.}}){{end}} and check whether the claim still holds.",
		},
		CodeAssetUnknown: {
			"{{.Args.asset}} is not an asset of {{.Args.player}}'s faction{{with .Args.scope}} ({{.}}){{end}} in the knowledge base.",
			"Use only asset names of that player's faction from the knowledge base.",
		},
		CodePowerMismatch: {
			"UnitId {{.Args.unit}} used {{.Args.power}}, which {{.Args.asset}} cannot use.",
			"The claim contradicts the replay; correct or drop it{{with .Args.alternatives}} (assets of the faction with {{$.Args.power}}: {{.}}){{end}}.",
		},
		CodeBuilderNotObserved: {
			"{{.Args.asset}} is a builder, but UnitId {{.Args.unit}} never acted as a builder (no build or placement).",
			"Lower the level to possible and say in needsConfirmation that it must be seen building.",
		},
		CodeAmbiguous: {
			"The evidence that UnitId {{.Args.unit}} is {{.Args.asset}} ({{.Args.power}}) fits several assets of the faction, too weak for {{.Args.level}}.",
			"Lower the level to possible and list as alternatives: {{.Args.alternatives}}.",
		},
		CodeBeforeProduction: {
			"UnitId {{.Args.unit}} appears at {{.Args.time}}, before {{.Args.player}} first produced {{.Args.asset}} at {{.Args.produced}}, so it cannot be {{.Args.asset}}.",
			"Correct or drop the claim; judge by the units that existed before {{.Args.time}}.",
		},
	}
	return parseTexts(texts)
}()

// parseTexts compiles code -> {message, recommendation} English fallback texts.
func parseTexts(texts map[string][2]string) map[string][2]*template.Template {
	out := make(map[string][2]*template.Template, len(texts))
	for code, t := range texts {
		out[code] = [2]*template.Template{
			template.Must(template.New(code).Option("missingkey=zero").Parse(t[0])),
			template.Must(template.New(code + ".recommendation").Option("missingkey=zero").Parse(t[1])),
		}
	}
	return out
}

// render fills the issue's message and recommendation text: the pack's templates
// in its language, else the English fallback. A parser issue keeps its own
// (English) message when the pack has no template for it.
func (c *Checker) render(is *interceptors.Issue) {
	text, ok, err := c.pack.FormatIssue(is.Code, *is)
	if ok && err == nil {
		is.Message = text.Message
		if text.Recommendation != "" {
			is.Recommendation.Text = text.Recommendation
			return
		}
	}
	en, has := englishText[is.Code]
	if !has {
		return
	}
	if (!ok || err != nil) && is.Message == "" {
		is.Message = execute(en[0], is)
	}
	is.Recommendation.Text = execute(en[1], is)
}

func execute(t *template.Template, is *interceptors.Issue) string {
	var b strings.Builder
	if err := t.Execute(&b, is); err != nil {
		return ""
	}
	return strings.TrimSpace(b.String())
}
