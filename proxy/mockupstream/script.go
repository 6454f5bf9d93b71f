package mockupstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/factgate/factgate/configs/strictyaml"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// Script tells the mock what to answer. Rules are tried in order and the first whose
// Match holds answers; when none holds, Default answers, and when Default is nil the
// built-in answer "mock answer: {{last_user}}" does. A nil *Script behaves like an empty
// one. The zero Script is valid.
//
// A Script is plain data: the server compiles it (regular expressions, content files,
// pre-encoded JSON) when it is installed with [Server.SetScript] or [New], so changing
// the struct afterwards has no effect until it is installed again.
type Script struct {
	// Rules are tried in order; the first match wins.
	Rules []Rule `yaml:"rules"`
	// Default answers requests no rule matches. Nil means the built-in echo answer.
	Default *Answer `yaml:"default"`
	// Dir is the directory content_file paths are relative to. LoadScript sets it to
	// the script file's directory; empty means the process's working directory.
	Dir string `yaml:"-"`
	// source names the script in errors (its file, or "script" when built in Go).
	source string
}

// Rule maps a match on the request to an answer.
type Rule struct {
	// Name labels the rule in errors and in [Recorded.Rule]. Empty means the rule is
	// named by its position ("rules[2]").
	Name string `yaml:"name"`
	// Match must hold for the rule to answer. The zero Match holds for every request.
	Match Match `yaml:"match"`
	// Answer is the rule's answer. Exactly one of Answer and Answers is set.
	Answer *Answer `yaml:"answer"`
	// Answers is a sequence: the rule's n-th match gets Answers[n-1], and once the
	// sequence is used up the last answer repeats (or, with Cycle, the sequence
	// starts over). [Server.Reset] restarts sequences.
	Answers []Answer `yaml:"answers"`
	// Generate, when set, computes the answer of every request the rule matches —
	// a scripted model written in Go, such as [Analyst]; Answer and Answers must
	// then be unset. It is called concurrently. An answer it returns that is not
	// valid (a negative chunk size, a missing content file...) is answered with a
	// 500 error envelope naming the problem. A YAML script cannot set it.
	Generate func(Request) Answer `yaml:"-"`
	// Cycle makes Answers start over once used up: answers [ok, ok, fault] with
	// cycle fails every third match.
	Cycle bool `yaml:"cycle"`
	// RandomFault, when set, answers a seeded random share of the rule's matches
	// with its own answer instead. Nil means none.
	RandomFault *RandomFault `yaml:"random_fault"`
}

// Request is a chat completion request as a rule's Generate sees it.
type Request struct {
	// Model is the request's model.
	Model string
	// Messages are the request's messages in order.
	Messages []Message
	// N is the number of choices asked for (1 when the request does not say).
	N int
}

// Message is one message of a Request: its role and text (the content string, or
// the text parts of a content array joined with "\n").
type Message struct {
	Role, Text string
}

// RandomFault fails a share of a rule's matches, chosen by a seeded draw per match
// index: the rule's n-th match fails when the draw for (Seed, n) is below Rate, so
// the same script fails the same matches in every run, whatever the concurrency.
type RandomFault struct {
	// Rate is the share of matches that fail, from 0 to 1.
	Rate float64 `yaml:"rate"`
	// Seed chooses which matches fail.
	Seed uint64 `yaml:"seed"`
	// Answer is what a failing match gets, usually a fault (a 429 with
	// Retry-After, a 503, a dropped connection).
	Answer Answer `yaml:"answer"`
}

// fails reports whether the match of index n draws a fault: splitmix64 of the
// seed and the index, as a fraction of 2⁶⁴, below the rate.
func (f *RandomFault) fails(n int) bool {
	z := f.Seed + uint64(n+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11)/(1<<53) < f.Rate
}

// Match is a conjunction of predicates on a chat completion request: every field that
// is set must hold. Regular expressions use Go's RE2 syntax and match anywhere in the
// text unless anchored. A message's text is its content string, or the text parts of
// a content array joined with "\n".
type Match struct {
	// LastUser is a regexp on the last user message. Empty means any.
	LastUser string `yaml:"last_user"`
	// System is a regexp on the system (and developer) messages joined with "\n".
	// Empty means any.
	System string `yaml:"system"`
	// AnyMessage is a regexp that must match at least one message of any role.
	// Empty means any.
	AnyMessage string `yaml:"any_message"`
	// Model must equal the request's model exactly. Empty means any.
	Model string `yaml:"model"`
	// HasAssistant, when set, requires that the conversation has (true) or has not
	// (false) an assistant turn. A hidden revision request has one. Nil means either.
	HasAssistant *bool `yaml:"has_assistant"`
	// Assistant is a regexp on the last assistant message. A request without an
	// assistant turn never matches a non-empty Assistant.
	Assistant string `yaml:"assistant"`
	// ResponseFormat must equal the request's response_format.type ("json_schema",
	// "json_object", "text"). Empty means any; a request without response_format never
	// matches a non-empty ResponseFormat.
	ResponseFormat string `yaml:"response_format"`
	// Header maps a request header name to a regexp that at least one of its values
	// must match. An absent header never matches. Nil means no header condition.
	Header map[string]string `yaml:"header"`
}

// Answer is one scripted response. The zero Answer is an empty assistant message with
// finish_reason "stop".
type Answer struct {
	// Content is the assistant message. "{{last_user}}" in it is replaced by the last
	// user message's text.
	Content string `yaml:"content"`
	// ContentFile names a file whose text is the content, relative to the script's Dir.
	// At most one of Content and ContentFile is set.
	ContentFile string `yaml:"content_file"`
	// Reasoning, when non-empty, is sent as reasoning_content (DeepSeek style): in the
	// message for non-stream answers, as pieces before the content when streaming.
	// "{{last_user}}" is replaced as in Content.
	Reasoning string `yaml:"reasoning"`
	// FinishReason is the choice's finish_reason. Empty means "stop", or
	// "tool_calls" when the answer has ToolCalls.
	FinishReason string `yaml:"finish_reason"`
	// ToolCalls are the assistant's tool calls (message.tool_calls). The message's
	// content is then null unless Content is set too. Nil means none.
	ToolCalls []ToolCall `yaml:"tool_calls"`
	// Choices answer a request for several choices ("n"): choice i gets Choices[i],
	// and the last one repeats when n is larger. With Choices, the answer's own
	// Content, ContentFile, Reasoning, ToolCalls and FinishReason stay empty. Nil
	// means every choice gets the answer itself.
	Choices []Choice `yaml:"choices"`
	// Usage overrides the computed token counts. Nil, or a zero field, means computed
	// (see [PromptTokens] and [CompletionTokens]).
	Usage *Usage `yaml:"usage"`
	// Latency is waited before the response starts. Zero means the server's default
	// ([Options.Latency]).
	Latency time.Duration `yaml:"latency"`
	// ChunkSize is the number of runes per streamed content or reasoning event. Zero
	// means the server's default ([Options.ChunkSize]).
	ChunkSize int `yaml:"chunk_size"`
	// ChunkDelay is waited between streamed events. Zero means the server's default
	// ([Options.ChunkDelay]).
	ChunkDelay time.Duration `yaml:"chunk_delay"`
	// Paced makes a non-stream answer take about as long as its stream would: it
	// is sent after ChunkDelay once per event of its stream (per piece of text, tool
	// call and choice), as a provider sends a whole answer once it has generated
	// it. False sends it at once (after Latency).
	Paced bool `yaml:"paced"`
	// Headers are extra response headers sent with the answer (e.g. x-request-id), for
	// testing that upstream headers reach the client. Nil means none.
	Headers map[string]string `yaml:"headers"`
	// Extra is a JSON object merged into the top level of the response object and of
	// every stream chunk, to test that unknown response fields reach the client. A key
	// the mock also writes ("model", "system_fingerprint") is replaced by Extra's value.
	// Nil means nothing is merged.
	Extra map[string]any `yaml:"extra"`
	// Fault, when set, replaces the normal answer by a failure. Nil means no fault.
	Fault *Fault `yaml:"fault"`
}

// ToolCall is one tool call of an answer, as OpenAI's message.tool_calls has it.
type ToolCall struct {
	// ID is the call's id. Empty means "call_mock_<completion>_<choice>_<call>".
	ID string `yaml:"id"`
	// Type is the call's type. Empty means "function".
	Type string `yaml:"type"`
	// Function is the function to call.
	Function ToolFunction `yaml:"function"`
}

// ToolFunction names the function a tool call calls and its arguments.
type ToolFunction struct {
	// Name is the function's name; required.
	Name string `yaml:"name"`
	// Arguments is the arguments object as JSON text ('{"city":"Paris"}'), sent as
	// a string the way OpenAI sends it (streamed in pieces). Empty means "{}".
	Arguments string `yaml:"arguments"`
}

// Choice is the answer of one choice when a request asks for several (see
// Answer.Choices). Its fields mean what the Answer's fields of the same name mean.
type Choice struct {
	Content      string     `yaml:"content"`
	ContentFile  string     `yaml:"content_file"`
	Reasoning    string     `yaml:"reasoning"`
	ToolCalls    []ToolCall `yaml:"tool_calls"`
	FinishReason string     `yaml:"finish_reason"`
}

// Usage overrides token counts. A zero field means the count is computed.
type Usage struct {
	PromptTokens     int `yaml:"prompt_tokens"`
	CompletionTokens int `yaml:"completion_tokens"`
}

// Fault makes an answer fail. SlowFirstByte combines with any other field; of Status,
// DisconnectAfter, Malformed and Drop at most one is set. A Fault with only
// SlowFirstByte delays a normal answer.
type Fault struct {
	// Status, when non-zero, is sent as the response status with Body and Headers
	// verbatim (e.g. 429 with a Retry-After header, 500 with an error envelope).
	Status int `yaml:"status"`
	// Body is the response body of a Status fault. Without a Content-Type in Headers it
	// is sent as application/json when it is valid JSON, text/plain otherwise.
	Body string `yaml:"body"`
	// Headers are the response headers of a Status fault.
	Headers map[string]string `yaml:"headers"`
	// SlowFirstByte is waited before any byte of the response (after the latency). A
	// client that gives up meanwhile ends the wait; the request is then recorded as
	// cancelled.
	SlowFirstByte time.Duration `yaml:"slow_first_byte"`
	// DisconnectAfter, when positive, cuts the connection without a [DONE] after that
	// many stream events (the role chunk is event 1). For a non-stream request the
	// response announces its full Content-Length, sends the first half of the body and
	// then cuts the connection.
	DisconnectAfter int `yaml:"disconnect_after"`
	// Malformed sends a 200 whose body is truncated, invalid JSON; when streaming, the
	// role chunk is followed by one event whose data is invalid JSON and then [DONE].
	Malformed bool `yaml:"malformed"`
	// Drop closes the connection without sending anything, as a crashed upstream does.
	Drop bool `yaml:"drop"`
}

// LoadScript reads a script from a YAML file and checks it: decoding is strict (an
// unknown key is an error naming the key, its line and the file), regular
// expressions must compile and content files must be readable. The returned script's
// Dir is the file's directory.
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mock script: %w", err)
	}
	s, err := ParseScript(data, path)
	if err != nil {
		return nil, err
	}
	s.Dir = filepath.Dir(path)
	if _, err := compileScript(s); err != nil {
		return nil, err
	}
	return s, nil
}

// ParseScript decodes a script from YAML strictly; source names it in errors (a file
// name, or anything that helps the reader). It does not resolve content files: Dir is
// left empty, so use LoadScript for a script on disk.
func ParseScript(data []byte, source string) (*Script, error) {
	if source == "" {
		source = "script"
	}
	var s Script
	// An empty document is a valid, empty script.
	if err := strictyaml.Decode(data, source, &s); err != nil && !errors.Is(err, strictyaml.ErrEmpty) {
		return nil, fmt.Errorf("mock script: %w", err)
	}
	s.source = source
	return &s, nil
}

// compiledScript is a Script ready to serve: regexps compiled, content files read,
// JSON fragments pre-encoded, sequence counters allocated.
type compiledScript struct {
	rules []compiledRule
	def   *compiledAnswer
}

type compiledRule struct {
	name    string
	match   compiledMatch
	answers []*compiledAnswer
	// generate computes the answer per request (Rule.Generate); dir is where its
	// content files are.
	generate func(Request) Answer
	dir      string
	cycle    bool
	// random and randomAnswer fail a seeded share of the matches; nil: none.
	random       *RandomFault
	randomAnswer *compiledAnswer
	// served counts the rule's matches since the last Reset, for sequences.
	served atomic.Int64
}

type compiledMatch struct {
	lastUser, system, anyMessage, assistant *regexp.Regexp
	model, responseFormat                   string
	hasAssistant                            *bool
	headers                                 []headerMatch
	// needsText says whether any predicate reads message texts.
	needsText bool
}

type headerMatch struct {
	name string // canonical
	re   *regexp.Regexp
}

// builtinDefault answers when a script has no rule for a request and no default.
var builtinDefault = &Answer{Content: "mock answer: " + lastUserPlaceholder}

// compileScript checks s and prepares it for serving. Errors name the script, the rule
// and the field.
func compileScript(s *Script) (*compiledScript, error) {
	if s == nil {
		s = &Script{}
	}
	src := s.source
	if src == "" {
		src = "script"
	}
	cs := &compiledScript{rules: make([]compiledRule, len(s.Rules))}
	for i := range s.Rules {
		r := &s.Rules[i]
		where := fmt.Sprintf("rules[%d]", i)
		if r.Name != "" {
			where += fmt.Sprintf(" (%q)", r.Name)
		}
		cr := &cs.rules[i]
		cr.name = r.Name
		if cr.name == "" {
			cr.name = fmt.Sprintf("rules[%d]", i)
		}
		m, err := compileMatch(&r.Match)
		if err != nil {
			return nil, fmt.Errorf("mock script %s: %s: %w", src, where, err)
		}
		cr.match = m
		switch {
		case r.Generate != nil && (r.Answer != nil || len(r.Answers) > 0):
			return nil, fmt.Errorf("mock script %s: %s: generate is set, so answer and answers must not be", src, where)
		case r.Generate != nil:
			cr.generate, cr.dir = r.Generate, s.Dir
		case r.Answer != nil && len(r.Answers) > 0:
			return nil, fmt.Errorf("mock script %s: %s: both answer and answers are set; use one", src, where)
		case r.Answer != nil:
			a, err := compileAnswer(r.Answer, s.Dir)
			if err != nil {
				return nil, fmt.Errorf("mock script %s: %s: answer: %w", src, where, err)
			}
			cr.answers = []*compiledAnswer{a}
		case len(r.Answers) > 0:
			for j := range r.Answers {
				a, err := compileAnswer(&r.Answers[j], s.Dir)
				if err != nil {
					return nil, fmt.Errorf("mock script %s: %s: answers[%d]: %w", src, where, j, err)
				}
				cr.answers = append(cr.answers, a)
			}
		default:
			return nil, fmt.Errorf("mock script %s: %s: has no answer; set answer or answers", src, where)
		}
		cr.cycle = r.Cycle
		if rf := r.RandomFault; rf != nil {
			if rf.Rate < 0 || rf.Rate > 1 {
				return nil, fmt.Errorf("mock script %s: %s: random_fault.rate %g is not between 0 and 1", src, where, rf.Rate)
			}
			a, err := compileAnswer(&rf.Answer, s.Dir)
			if err != nil {
				return nil, fmt.Errorf("mock script %s: %s: random_fault.answer: %w", src, where, err)
			}
			cr.random, cr.randomAnswer = rf, a
		}
	}
	def := s.Default
	if def == nil {
		def = builtinDefault
	}
	a, err := compileAnswer(def, s.Dir)
	if err != nil {
		return nil, fmt.Errorf("mock script %s: default: %w", src, err)
	}
	cs.def = a
	return cs, nil
}

func compileMatch(m *Match) (compiledMatch, error) {
	var cm compiledMatch
	for _, f := range []struct {
		name string
		expr string
		dst  **regexp.Regexp
	}{
		{"last_user", m.LastUser, &cm.lastUser},
		{"system", m.System, &cm.system},
		{"any_message", m.AnyMessage, &cm.anyMessage},
		{"assistant", m.Assistant, &cm.assistant},
	} {
		if f.expr == "" {
			continue
		}
		re, err := regexp.Compile(f.expr)
		if err != nil {
			return cm, fmt.Errorf("match.%s: %w", f.name, err)
		}
		*f.dst = re
		cm.needsText = true
	}
	cm.model = m.Model
	cm.responseFormat = m.ResponseFormat
	cm.hasAssistant = m.HasAssistant
	names := make([]string, 0, len(m.Header))
	for name := range m.Header {
		names = append(names, name)
	}
	// Sorted so that the first failing predicate, and so the cost, is deterministic.
	slices.Sort(names)
	for _, name := range names {
		re, err := regexp.Compile(m.Header[name])
		if err != nil {
			return cm, fmt.Errorf("match.header[%q]: %w", name, err)
		}
		cm.headers = append(cm.headers, headerMatch{name: textproto.CanonicalMIMEHeaderKey(name), re: re})
	}
	return cm, nil
}

// lastUserPlaceholder is the one template an answer's text may use.
const lastUserPlaceholder = "{{last_user}}"

// compiledAnswer is an Answer with its JSON fragments encoded once, so the hot path
// only appends bytes.
type compiledAnswer struct {
	// choices are the answers of choices 0, 1, ...: one, unless the answer has
	// Choices; the last repeats for a request asking for more.
	choices []*compiledChoice
	// templated: some choice's text uses {{last_user}}.
	templated                 bool
	promptTokensOverride      int
	completionTokensOverride  int
	latency, chunkDelay       time.Duration
	chunkSize                 int
	paced                     bool
	headers                   [][2]string
	extraMembers              []byte            // ,"k":v,... for keys the mock does not write
	extraOverrides            map[string][]byte // keys the mock writes too, set with sjson
	fault                     *Fault
	faultHeaders              [][2]string
	faultContentType          string
	hasStatusFault, hasDetour bool
}

// compiledChoice is the answer of one choice.
type compiledChoice struct {
	content, reasoning string
	// contentJSON and reasoningJSON are the quoted JSON strings; nil when templated.
	contentJSON, reasoningJSON []byte
	templated                  bool
	// nullContent: the message's content is null (tool calls and no content).
	nullContent bool
	toolCalls   []compiledToolCall
	// toolCallsJSON is the message's tool_calls array; nil without tool calls.
	toolCallsJSON []byte
	finishJSON    []byte
	// finish is finishJSON as a string, for the stream's finish chunk.
	finish string
	// completionTokens is computed from the untemplated text; -1 when templated.
	completionTokens int
	// toolTokens is the tool calls' share of completionTokens.
	toolTokens int
}

// compiledToolCall is one tool call with its JSON fragments.
type compiledToolCall struct {
	// head is the first streamed delta's call object, with empty arguments:
	// {"index":i,"id":..,"type":..,"function":{"name":..,"arguments":""}}.
	head []byte
	// args are the arguments text, streamed in pieces after head.
	args string
}

// reservedKeys are the top-level keys the mock writes itself.
var reservedKeys = map[string]bool{
	"id": true, "object": true, "created": true, "model": true, "choices": true,
	"usage": true, "system_fingerprint": true,
}

func compileAnswer(a *Answer, dir string) (*compiledAnswer, error) {
	if a.ChunkSize < 0 {
		return nil, fmt.Errorf("chunk_size %d is negative", a.ChunkSize)
	}
	if a.Latency < 0 || a.ChunkDelay < 0 {
		return nil, errors.New("latency and chunk_delay must not be negative")
	}
	ca := &compiledAnswer{
		latency:    a.Latency,
		chunkSize:  a.ChunkSize,
		chunkDelay: a.ChunkDelay,
		paced:      a.Paced,
	}
	choices := a.Choices
	if len(choices) == 0 {
		choices = []Choice{{Content: a.Content, ContentFile: a.ContentFile, Reasoning: a.Reasoning, ToolCalls: a.ToolCalls, FinishReason: a.FinishReason}}
	} else if a.Content != "" || a.ContentFile != "" || a.Reasoning != "" || len(a.ToolCalls) > 0 || a.FinishReason != "" {
		return nil, errors.New("choices is set, so content, content_file, reasoning, tool_calls and finish_reason go into each choice")
	}
	for i := range choices {
		c, err := compileChoice(&choices[i], dir, i)
		if err != nil {
			if len(a.Choices) > 0 {
				return nil, fmt.Errorf("choices[%d]: %w", i, err)
			}
			return nil, err
		}
		ca.choices = append(ca.choices, c)
		ca.templated = ca.templated || c.templated
	}
	if a.Usage != nil {
		if a.Usage.PromptTokens < 0 || a.Usage.CompletionTokens < 0 {
			return nil, errors.New("usage counts must not be negative")
		}
		ca.promptTokensOverride = a.Usage.PromptTokens
		ca.completionTokensOverride = a.Usage.CompletionTokens
	}
	ca.headers = sortedHeaders(a.Headers)
	if len(a.Extra) > 0 {
		keys := make([]string, 0, len(a.Extra))
		for k := range a.Extra {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, err := json.Marshal(jsonable(a.Extra[k]))
			if err != nil {
				return nil, fmt.Errorf("extra[%q]: %w", k, err)
			}
			if reservedKeys[k] {
				if ca.extraOverrides == nil {
					ca.extraOverrides = map[string][]byte{}
				}
				ca.extraOverrides[k] = v
				continue
			}
			ca.extraMembers = append(ca.extraMembers, ',')
			ca.extraMembers = rawjson.AppendString(ca.extraMembers, k)
			ca.extraMembers = append(ca.extraMembers, ':')
			ca.extraMembers = append(ca.extraMembers, v...)
		}
	}
	if f := a.Fault; f != nil {
		if err := checkFault(f); err != nil {
			return nil, fmt.Errorf("fault: %w", err)
		}
		ca.fault = f
		ca.hasStatusFault = f.Status != 0
		ca.hasDetour = f.Status != 0 || f.DisconnectAfter > 0 || f.Malformed || f.Drop
		ca.faultHeaders = sortedHeaders(f.Headers)
		ca.faultContentType = "text/plain; charset=utf-8"
		if json.Valid([]byte(f.Body)) {
			ca.faultContentType = "application/json"
		}
	}
	return ca, nil
}

// compileChoice compiles the answer of choice index.
func compileChoice(ch *Choice, dir string, index int) (*compiledChoice, error) {
	content := ch.Content
	if ch.ContentFile != "" {
		if ch.Content != "" {
			return nil, errors.New("both content and content_file are set; use one")
		}
		p := ch.ContentFile
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("content_file: %w", err)
		}
		content = string(b)
	}
	finish := ch.FinishReason
	if finish == "" {
		finish = "stop"
		if len(ch.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	c := &compiledChoice{
		content:     content,
		reasoning:   ch.Reasoning,
		templated:   strings.Contains(content, lastUserPlaceholder) || strings.Contains(ch.Reasoning, lastUserPlaceholder),
		nullContent: len(ch.ToolCalls) > 0 && content == "",
		finishJSON:  rawjson.AppendString(nil, finish),
	}
	c.finish = string(c.finishJSON)
	toolTokens := 0
	for j, tc := range ch.ToolCalls {
		if tc.Function.Name == "" {
			return nil, fmt.Errorf("tool_calls[%d].function.name is empty", j)
		}
		id, typ, args := tc.ID, tc.Type, tc.Function.Arguments
		if id == "" {
			id = fmt.Sprintf("call_mock_%d_%d", index, j)
		}
		if typ == "" {
			typ = "function"
		}
		if args == "" {
			args = "{}"
		}
		var call []byte
		call = append(call, `{"id":`...)
		call = rawjson.AppendString(call, id)
		call = append(call, `,"type":`...)
		call = rawjson.AppendString(call, typ)
		call = append(call, `,"function":{"name":`...)
		call = rawjson.AppendString(call, tc.Function.Name)
		fn := len(call)
		call = append(call, `,"arguments":`...)
		call = rawjson.AppendString(call, args)
		call = append(call, "}}"...)
		if c.toolCallsJSON == nil {
			c.toolCallsJSON = append(c.toolCallsJSON, '[')
		} else {
			c.toolCallsJSON = append(c.toolCallsJSON, ',')
		}
		c.toolCallsJSON = append(c.toolCallsJSON, call...)
		head := append([]byte(`{"index":`), strconv.Itoa(j)...)
		head = append(head, ',')
		head = append(head, call[1:fn]...)
		head = append(head, `,"arguments":""}}`...)
		c.toolCalls = append(c.toolCalls, compiledToolCall{head: head, args: args})
		toolTokens += Tokens(tc.Function.Name) + Tokens(args)
	}
	if c.toolCallsJSON != nil {
		c.toolCallsJSON = append(c.toolCallsJSON, ']')
	}
	c.toolTokens = toolTokens
	if !c.templated {
		c.contentJSON = rawjson.AppendString(nil, content)
		if ch.Reasoning != "" {
			c.reasoningJSON = rawjson.AppendString(nil, ch.Reasoning)
		}
		c.completionTokens = CompletionTokens(content, ch.Reasoning) + toolTokens
	} else {
		c.completionTokens = -1
	}
	return c, nil
}

func checkFault(f *Fault) error {
	kinds := 0
	for _, on := range []bool{f.Status != 0, f.DisconnectAfter != 0, f.Malformed, f.Drop} {
		if on {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		return errors.New("set at most one of status, disconnect_after, malformed and drop")
	case f.Status != 0 && (f.Status < 100 || f.Status > 599):
		return fmt.Errorf("status %d is not an HTTP status", f.Status)
	case f.Status == 0 && (f.Body != "" || len(f.Headers) > 0):
		return errors.New("body and headers need a status")
	case f.DisconnectAfter < 0:
		return fmt.Errorf("disconnect_after %d is negative", f.DisconnectAfter)
	case f.SlowFirstByte < 0:
		return errors.New("slow_first_byte must not be negative")
	}
	return nil
}

// jsonable turns the map[string]interface{} / []interface{} trees YAML produces into
// something encoding/json accepts (YAML may also produce map[interface{}]interface{}).
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = jsonable(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[fmt.Sprint(k)] = jsonable(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = jsonable(e)
		}
		return out
	default:
		return v
	}
}

func sortedHeaders(m map[string]string) [][2]string {
	if len(m) == 0 {
		return nil
	}
	out := make([][2]string, 0, len(m))
	for k, v := range m {
		out = append(out, [2]string{textproto.CanonicalMIMEHeaderKey(k), v})
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return out
}
