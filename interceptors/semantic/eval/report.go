package eval

import (
	"math"
	"strings"
	"time"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/semantic"
)

// What the validators said of a draft (Result.Draft).
const (
	DraftApproved  = "approved"  // no semantic issue
	DraftRejected  = "rejected"  // a semantic.rejected
	DraftFailed    = "failed"    // a semantic.failed: an execution failure
	DraftMalformed = "malformed" // a deterministic Fatal: the judge never ran
	DraftError     = "error"     // the case could not be evaluated (Result.Error)
)

// The two proposals of a chunk (Result.Proposal).
const (
	ProposalCorrect = "correct"
	ProposalWrong   = "wrong"
)

// Rate is Count of Of, and the rate (0 when Of is 0), rounded to four decimals.
type Rate struct {
	Count int     `json:"count"`
	Of    int     `json:"of"`
	Rate  float64 `json:"rate"`
}

func rate(count, of int) Rate {
	r := Rate{Count: count, Of: of}
	if of > 0 {
		r.Rate = math.Round(float64(count)/float64(of)*10000) / 10000
	}
	return r
}

// Latency is a latency distribution in milliseconds (nearest rank).
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	N   int     `json:"n"`
}

func latency(ds []time.Duration) Latency {
	l := Latency{N: len(ds)}
	if len(ds) > 0 {
		l.P50, l.P95 = ms(Percentile(ds, 50)), ms(Percentile(ds, 95))
	}
	return l
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

// Result is one case: a chunk with one proposal.
type Result struct {
	Chunk    string `json:"chunk"`
	Category string `json:"category"`
	// Label is the chunk's label (Report.LabelField).
	Label bool `json:"label"`
	// Proposal is ProposalCorrect or ProposalWrong; Proposed the value of the
	// scripted draft.
	Proposal string `json:"proposal"`
	Proposed string `json:"proposed"`
	// Draft is what the validators said of the draft (DraftApproved...).
	Draft string `json:"draft"`
	// FinalValue is the proposed value of the answer the client got ("" when it
	// got an error).
	FinalValue string `json:"final_value,omitempty"`
	// FinalAccepted: the client's answer has no semantic issue and nothing at or
	// above Contradiction.
	FinalAccepted bool `json:"final_accepted"`
	// Corrected: a wrong proposal, rejected, whose final answer has the chunk's
	// label and was accepted; Exact when its value is the labelled one.
	Corrected bool `json:"corrected"`
	Exact     bool `json:"exact"`
	// Regressed: a correct proposal whose final answer has the other label.
	Regressed     bool               `json:"regressed"`
	JudgeCalls    int                `json:"judge_calls"`
	RevisionCalls int                `json:"revision_calls"`
	AddedMs       float64            `json:"added_ms"`
	JudgeUsage    interceptors.Usage `json:"judge_usage"`
	RevisionUsage interceptors.Usage `json:"revision_usage"`
	Status        int                `json:"status"`
	Error         string             `json:"error,omitempty"`

	judgeDurations []time.Duration
}

// Report is the outcome of a run.
type Report struct {
	Set        string   `json:"set"`
	Route      string   `json:"route"`
	Validators []string `json:"validators"`
	Judge      string   `json:"judge"`
	Producer   string   `json:"producer"`
	// LabelField is the chunks' label field ("active_combat"); LabelName what a
	// true label means ("combat").
	LabelField string `json:"label_field"`
	LabelName  string `json:"label_name"`
	// ProposedField is the answer's field the validator judges ("kind").
	ProposedField string `json:"proposed_field"`
	Chunks        int    `json:"chunks"`
	Cases         int    `json:"cases"`

	FalseAcceptance   Rate `json:"false_acceptance"`
	FalseRejection    Rate `json:"false_rejection"`
	ExecutionFailures Rate `json:"execution_failures"`
	Corrections       Rate `json:"corrections"`
	ExactCorrections  int  `json:"exact_corrections"`
	Regressions       Rate `json:"regressions"`

	AddedCalls struct {
		Total    int     `json:"total"`
		Judge    int     `json:"judge"`
		Revision int     `json:"revision"`
		PerCase  float64 `json:"per_case"`
	} `json:"added_calls"`
	JudgeLatency Latency `json:"judge_latency_ms"`
	AddedLatency Latency `json:"added_latency_ms"`
	Tokens       struct {
		Judge    interceptors.Usage `json:"judge"`
		Revision interceptors.Usage `json:"revision"`
		PerCase  float64            `json:"per_case"`
	} `json:"tokens"`

	// Errors counts cases that could not be evaluated.
	Errors  int      `json:"errors"`
	Results []Result `json:"results"`
}

// draftOutcome reads what the validators said of the draft.
func draftOutcome(issues []interceptors.Issue) string {
	out := DraftApproved
	for _, is := range issues {
		switch {
		case is.Code == semantic.CodeFailed:
			return DraftFailed
		case is.Code == semantic.CodeRejected:
			out = DraftRejected
		case is.Severity == interceptors.Fatal && out == DraftApproved:
			out = DraftMalformed
		}
	}
	return out
}

// accepted reports an answer without semantic issues and nothing at or above
// Contradiction.
func accepted(issues []interceptors.Issue) bool {
	for _, is := range issues {
		if strings.HasPrefix(is.Code, "semantic.") || is.Severity >= interceptors.Contradiction {
			return false
		}
	}
	return true
}

// summarize computes the figures from the results.
func summarize(rep *Report) {
	var wrong, correct, fa, fr, failed, rejectedWrong, corrected, exact, regressed int
	var added, judge []time.Duration
	for _, r := range rep.Results {
		if r.Error != "" {
			rep.Errors++
		}
		switch r.Proposal {
		case ProposalWrong:
			wrong++
			if r.Draft == DraftApproved {
				fa++
			}
			if r.Draft == DraftRejected {
				rejectedWrong++
			}
			if r.Corrected {
				corrected++
			}
			if r.Exact {
				exact++
			}
		case ProposalCorrect:
			correct++
			if r.Draft == DraftRejected {
				fr++
			}
			if r.Regressed {
				regressed++
			}
		}
		if r.Draft == DraftFailed {
			failed++
		}
		rep.AddedCalls.Judge += r.JudgeCalls
		rep.AddedCalls.Revision += r.RevisionCalls
		rep.Tokens.Judge = rep.Tokens.Judge.Add(r.JudgeUsage)
		rep.Tokens.Revision = rep.Tokens.Revision.Add(r.RevisionUsage)
		added = append(added, time.Duration(r.AddedMs*float64(time.Millisecond)))
		judge = append(judge, r.judgeDurations...)
	}
	rep.FalseAcceptance = rate(fa, wrong)
	rep.FalseRejection = rate(fr, correct)
	rep.ExecutionFailures = rate(failed, len(rep.Results))
	rep.Corrections = rate(corrected, rejectedWrong)
	rep.ExactCorrections = exact
	rep.Regressions = rate(regressed, correct)
	rep.AddedCalls.Total = rep.AddedCalls.Judge + rep.AddedCalls.Revision
	if n := len(rep.Results); n > 0 {
		rep.AddedCalls.PerCase = math.Round(float64(rep.AddedCalls.Total)/float64(n)*100) / 100
		rep.Tokens.PerCase = math.Round(float64(rep.Tokens.Judge.TotalTokens+rep.Tokens.Revision.TotalTokens)/float64(n)*10) / 10
	}
	rep.JudgeLatency = latency(judge)
	rep.AddedLatency = latency(added)
}
