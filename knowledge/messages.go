package knowledge

import (
	"fmt"
	"slices"
	"strings"
)

// IssueText is an issue's message and recommendation in the pack's language.
type IssueText struct {
	Message        string
	Recommendation string
}

// FormatIssue renders the pack's message and recommendation for an issue code over
// data (a MessageData, or any value with the fields Code, Path and Args, such as
// interceptors.Issue). ok is false when the pack has no message for the code; the
// caller then keeps its own text. An argument the data does not carry renders empty.
func (p *Pack) FormatIssue(code string, data any) (text IssueText, ok bool, err error) {
	m, ok := p.Messages[code]
	if !ok || m.MessageTmpl == nil {
		return IssueText{}, false, nil
	}
	var b strings.Builder
	if err := m.MessageTmpl.Execute(&b, data); err != nil {
		return IssueText{}, true, fmt.Errorf("pack %s: message of %s: %w", p.Name, code, err)
	}
	text.Message = strings.TrimSpace(b.String())
	if m.RecommendationTmpl != nil {
		b.Reset()
		if err := m.RecommendationTmpl.Execute(&b, data); err != nil {
			return IssueText{}, true, fmt.Errorf("pack %s: recommendation of %s: %w", p.Name, code, err)
		}
		text.Recommendation = strings.TrimSpace(b.String())
	}
	return text, true, nil
}

// FormatConfirm renders the pack's confirm text for an issue code over data (see
// FormatIssue); ok is false when the pack has none for the code.
func (p *Pack) FormatConfirm(code string, data any) (text string, ok bool, err error) {
	m, ok := p.Messages[code]
	if !ok || m.ConfirmTmpl == nil {
		return "", false, nil
	}
	var b strings.Builder
	if err := m.ConfirmTmpl.Execute(&b, data); err != nil {
		return "", true, fmt.Errorf("pack %s: confirm text of %s: %w", p.Name, code, err)
	}
	return strings.TrimSpace(b.String()), true, nil
}

// RenderNotice renders the note to the reader from the pack's notice template,
// trimmed. It fails when the pack has no notice template.
func (p *Pack) RenderNotice(data NoticeData) (string, error) {
	if p.Revision == nil || p.Revision.NoticeTmpl == nil {
		return "", fmt.Errorf("pack %s has no notice template", p.Name)
	}
	var b strings.Builder
	if err := p.Revision.NoticeTmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("pack %s: notice template %s: %w", p.Name, p.Revision.NoticeTemplate, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// LevelName returns an evidence level ("possible") in the pack's language: the
// first spelling its claims contract lists for it, else the level as given.
func (p *Pack) LevelName(level string) string {
	if p.Claims != nil {
		if sp := p.Claims.Levels[level]; len(sp) > 0 && strings.TrimSpace(sp[0]) != "" {
			return strings.TrimSpace(sp[0])
		}
	}
	return level
}

// RenderRevision renders the hidden revision's user turn. It fails when the pack
// has no revision template.
func (p *Pack) RenderRevision(data RevisionData) (string, error) {
	if p.Revision == nil || p.Revision.Tmpl == nil {
		return "", fmt.Errorf("pack %s has no revision template", p.Name)
	}
	var b strings.Builder
	if err := p.Revision.Tmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("pack %s: revision template %s: %w", p.Name, p.Revision.Template, err)
	}
	return b.String(), nil
}

// RenderRepair renders the repair request's user turn (asking only for the missing
// claims block). It fails when the pack has no repair template.
func (p *Pack) RenderRepair(data RevisionData) (string, error) {
	if p.Revision == nil || p.Revision.RepairTmpl == nil {
		return "", fmt.Errorf("pack %s has no repair template", p.Name)
	}
	var b strings.Builder
	if err := p.Revision.RepairTmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("pack %s: repair template %s: %w", p.Name, p.Revision.RepairTemplate, err)
	}
	return b.String(), nil
}

// RenderGuidance renders a semantic validator's correction guidance for a rejecting
// verdict; ok is false when the verdict has none (it approves or is unknown).
func (s *SemanticSpec) RenderGuidance(verdict string, data GuidanceData) (text string, ok bool, err error) {
	t := s.GuidanceTmpl[verdict]
	if t == nil {
		return "", false, nil
	}
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", true, fmt.Errorf("semantic validator %s: guidance for %s: %w", s.Name, verdict, err)
	}
	return strings.TrimSpace(b.String()), true, nil
}

// Verdict returns the verdict with that name, or nil.
func (s *SemanticSpec) Verdict(name string) *VerdictSpec {
	for i := range s.Verdicts {
		if s.Verdicts[i].Name == name {
			return &s.Verdicts[i]
		}
	}
	return nil
}

// Consistent reports whether the verdict may be given for the proposed value: the
// approving verdict always; a rejecting one only when its when_proposed lists the
// value (if set) and its when_not_proposed does not (if set).
func (v *VerdictSpec) Consistent(proposed string) bool {
	if v.Approves {
		return true
	}
	if len(v.WhenProposed) > 0 && !slices.Contains(v.WhenProposed, proposed) {
		return false
	}
	if len(v.WhenNotProposed) > 0 && slices.Contains(v.WhenNotProposed, proposed) {
		return false
	}
	return true
}
