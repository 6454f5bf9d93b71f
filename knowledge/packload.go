package knowledge

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"text/template"

	"github.com/factgate/factgate/configs/strictyaml"
)

// PackFile is the name of a pack's manifest inside its folder.
const PackFile = "pack.yaml"

// PackErrors is every problem found while loading one pack, each naming the file
// and the key (or, for knowledge set files, the place as SetError does).
type PackErrors []error

// Error renders one problem per line.
func (l PackErrors) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes the individual problems to errors.Is and errors.As.
func (l PackErrors) Unwrap() []error { return l }

// The op fields an operation rule's named groups may fill.
var opFields = []string{"time", "player", "asset", "power", "unit", "pos", "units"}

// The evidence levels of the claims contract, by canonical name.
var evidenceLevels = []string{"confirmed", "highly likely", "possible", "uncertain", "ruled out"}

// The claim lists of the claims contract.
var claimLists = []string{"unitClaims", "eventClaims", "timelineClaims"}

// LoadPack loads the pack in folder dir of fsys: it decodes dir/pack.yaml strictly
// (an unknown key is an error naming it and the file), reads every file it names,
// loads every knowledge set, compiles every regular expression and parses every
// template, and checks the references between them (the default set exists, the
// evidence types refer to operation fields the rules capture, semantic verdicts fit
// the answer's enum...). On failure the error is PackErrors with every problem.
func LoadPack(fsys fs.FS, dir string) (*Pack, error) {
	return loadPack(fsys, dir, dir)
}

// ReadPackManifest decodes a pack.yaml file strictly, without reading the files it
// names or checking anything else (LoadPack does that).
func ReadPackManifest(file string) (*Pack, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var p Pack
	if err := decodeStrictYAML(data, file, &p); err != nil {
		return nil, err
	}
	p.Dir = filepath.Dir(file)
	return &p, nil
}

// LoadPackDir loads the pack in the operating system folder dir (see LoadPack);
// messages name files under dir.
func LoadPackDir(dir string) (*Pack, error) {
	return loadPack(os.DirFS(dir), ".", dir)
}

// packLoader collects the problems of one pack.
type packLoader struct {
	fsys    fs.FS
	dir     string // the pack folder inside fsys
	display string // how the folder is named in messages
	p       *Pack
	errs    PackErrors
}

func (l *packLoader) file(name string) string { return path.Join(l.display, name) }

func (l *packLoader) fail(file, key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if key != "" {
		msg = key + ": " + msg
	}
	l.errs = append(l.errs, fmt.Errorf("%s: %s", l.file(file), msg))
}

// read reads a file the manifest names at key.
func (l *packLoader) read(key, name string) (string, bool) {
	if name == "" {
		l.fail(PackFile, key, "missing file name")
		return "", false
	}
	full := path.Join(l.dir, name)
	if !fs.ValidPath(full) || strings.HasPrefix(path.Clean(name), "..") || path.IsAbs(name) {
		l.fail(PackFile, key, "file %q must be a relative path inside the pack folder", name)
		return "", false
	}
	b, err := fs.ReadFile(l.fsys, full)
	if err != nil {
		l.fail(PackFile, key, "reading %q: %v", name, unwrapPathError(err))
		return "", false
	}
	return string(b), true
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func loadPack(fsys fs.FS, dir, display string) (*Pack, error) {
	l := &packLoader{fsys: fsys, dir: dir, display: display, p: &Pack{Dir: display}}
	data, err := fs.ReadFile(fsys, path.Join(dir, PackFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, PackErrors{fmt.Errorf("%s: missing: a pack folder holds a %s", l.file(PackFile), PackFile)}
	}
	if err != nil {
		return nil, PackErrors{fmt.Errorf("%s: %v", l.file(PackFile), unwrapPathError(err))}
	}
	if err := decodeStrictYAML(data, l.file(PackFile), l.p); err != nil {
		return nil, PackErrors{err}
	}
	p := l.p
	p.Dir = display
	if p.Name == "" {
		p.Name = filepath.Base(display)
		if p.Name == "." || p.Name == string(filepath.Separator) {
			l.fail(PackFile, "name", "missing")
		}
	}
	if p.Language == "" {
		l.fail(PackFile, "language", "missing (the language of the pack's texts, like zh or en)")
	}
	l.assets()
	l.messages()
	l.sets()
	l.context()
	l.facts()
	l.records(data)
	l.claims()
	l.rules()
	l.revision()
	l.answer()
	l.semantic()
	l.applies()
	if len(l.errs) > 0 {
		return nil, l.errs
	}
	return p, nil
}

// decodeStrictYAML decodes one YAML document of file into v, rejecting unknown
// keys; the error names the file, the line, the key's path and the key meant.
func decodeStrictYAML(data []byte, file string, v any) error {
	err := strictyaml.Decode(data, file, v)
	if errors.Is(err, strictyaml.ErrEmpty) {
		return fmt.Errorf("%s: %w", file, err)
	}
	return err
}

func (l *packLoader) assets() {
	l.p.AssetText = map[string]string{}
	for _, name := range sortedKeys(l.p.Assets) {
		if text, ok := l.read("assets."+name, l.p.Assets[name]); ok {
			if strings.TrimSpace(text) == "" {
				l.fail(l.p.Assets[name], "", "asset %q is empty", name)
			}
			l.p.AssetText[name] = text
		}
	}
}

// MessageData is what the issue message templates execute over; any value with the
// same fields works too (interceptors.Issue has them).
type MessageData struct {
	// Code is the issue's code ("evidence.ambiguous").
	Code string
	// Path is the claim path ("unitClaims[2]").
	Path string
	// Args are the issue's arguments ("unit", "power", "alternatives"...).
	Args map[string]string
}

func (l *packLoader) messages() {
	p := l.p
	if p.Messages == nil {
		p.Messages = map[string]MessageSpec{}
	}
	if p.MessagesFile != "" {
		if text, ok := l.read("messages_file", p.MessagesFile); ok {
			var more map[string]MessageSpec
			if err := decodeStrictYAML([]byte(text), l.file(p.MessagesFile), &more); err != nil {
				l.errs = append(l.errs, err)
			}
			for _, code := range sortedKeys(more) {
				if _, dup := p.Messages[code]; dup {
					l.fail(p.MessagesFile, code, "defined twice (also inline in %s)", PackFile)
					continue
				}
				p.Messages[code] = more[code]
			}
		}
	}
	file := PackFile
	if p.MessagesFile != "" {
		file = p.MessagesFile
	}
	sample := MessageData{Code: "sample", Path: "unitClaims[0]", Args: map[string]string{}}
	for _, code := range sortedKeys(p.Messages) {
		m := p.Messages[code]
		if m.Notice != "" && !IsNoticeHeading(m.Notice) {
			l.fail(file, code+".notice", "unknown heading %q (want %s)", m.Notice, strings.Join(NoticeHeadings, ", "))
		}
		switch {
		case strings.TrimSpace(m.Message) != "":
			m.MessageTmpl = l.template(file, code+".message", m.Message, sample)
		case m.Notice == "" || m.Recommendation != "" || m.Confirm != "":
			// An entry may declare only the code's notice heading (the validator's own
			// text is kept); anything else needs the message.
			l.fail(file, code+".message", "empty message")
		}
		if m.Recommendation != "" {
			m.RecommendationTmpl = l.template(file, code+".recommendation", m.Recommendation, sample)
		}
		if m.Confirm != "" {
			m.ConfirmTmpl = l.template(file, code+".confirm", m.Confirm, sample)
		}
		p.Messages[code] = m
	}
}

// template parses text as a Go text/template and executes it once with sample data,
// so that a reference to a field the data does not have fails at load.
func (l *packLoader) template(file, key, text string, sample any) *template.Template {
	name := key
	if name == "" {
		name = file
	}
	t, err := template.New(name).Option("missingkey=zero").Parse(text)
	if err != nil {
		l.fail(file, key, "template: %v", err)
		return nil
	}
	if err := t.Execute(io.Discard, sample); err != nil {
		l.fail(file, key, "template: %v", err)
		return nil
	}
	return t
}

func (l *packLoader) sets() {
	p := l.p
	p.sets = map[string]*Set{}
	for _, name := range sortedKeys(p.Sets) {
		spec := p.Sets[name]
		key := "knowledge_sets." + name
		for h := range spec.Headings {
			if h != "global" && !slices.Contains(spec.Dimensions, h) {
				l.fail(PackFile, key+".headings", "heading %q is neither \"global\" nor a declared dimension %v", h, spec.Dimensions)
			}
		}
		text, ok := l.read(key+".file", spec.File)
		if !ok {
			continue
		}
		set, err := ParseSet([]byte(text), l.file(spec.File), SetOptions{
			Name: name, Dimensions: spec.Dimensions, Assets: p.AssetText,
			Title: spec.Title, Headings: spec.Headings, Language: p.Language,
		})
		if err != nil {
			var se SetErrors
			if errors.As(err, &se) {
				for _, e := range se {
					l.errs = append(l.errs, e)
				}
			} else {
				l.errs = append(l.errs, err)
			}
			continue
		}
		p.sets[name] = set
	}
	switch {
	case p.DefaultSet == "" && len(p.Sets) > 0:
		l.fail(PackFile, "default_set", "missing (one of %s)", strings.Join(sortedKeys(p.Sets), ", "))
	case p.DefaultSet != "" && !hasKey(p.Sets, p.DefaultSet):
		l.fail(PackFile, "default_set", "names set %q, which knowledge_sets does not declare", p.DefaultSet)
	}
}

// compile compiles a rule's regex and checks it has the named groups.
func (l *packLoader) compile(key, expr string, groups ...string) *regexp.Regexp {
	if expr == "" {
		l.fail(PackFile, key, "missing regex")
		return nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		l.fail(PackFile, key, "%v", err)
		return nil
	}
	for _, g := range groups {
		if re.SubexpIndex(g) < 0 {
			l.fail(PackFile, key, "regex %q needs a named group (?P<%s>...)", expr, g)
		}
	}
	return re
}

func (l *packLoader) context() {
	p := l.p
	c := &p.Context
	if c.MaxLines < 0 || c.MaxBytes < 0 {
		l.fail(PackFile, "context", "max_lines and max_bytes must not be negative")
	}
	if r := c.KnowledgeSet; r != nil {
		r.Re = l.compile("context.knowledge_set.regex", r.Regex, "value")
		r.start = lineStartOf(r.Regex)
		r.memo = newLineMemo[valueVerdict]()
		for _, from := range sortedKeys(r.Map) {
			if !hasKey(p.Sets, r.Map[from]) {
				l.fail(PackFile, "context.knowledge_set.map."+from, "names set %q, which knowledge_sets does not declare", r.Map[from])
			}
		}
		if r.Default != "" && !hasKey(p.Sets, r.Default) {
			l.fail(PackFile, "context.knowledge_set.default", "names set %q, which knowledge_sets does not declare", r.Default)
		}
	}
	if r := c.Players; r != nil {
		r.Re = l.compile("context.players.regex", r.Regex, "value")
		r.start = lineStartOf(r.Regex)
		r.ItemRe = l.compile("context.players.item", r.Item, "name", "scope")
		r.memo = newLineMemo[playersVerdict]()
		if r.Dimension == "" {
			l.fail(PackFile, "context.players.dimension", "missing (the dimension the players' scope values belong to, like factions)")
		} else if !l.isDimension(r.Dimension) {
			l.fail(PackFile, "context.players.dimension", "%q is not a dimension of any of the pack's knowledge sets", r.Dimension)
		}
	}
	for _, dim := range sortedKeys(c.Scopes) {
		r := c.Scopes[dim]
		r.Re = l.compile("context.scopes."+dim+".regex", r.Regex, "value")
		r.start = lineStartOf(r.Regex)
		r.memo = newLineMemo[valueVerdict]()
		if !l.isDimension(dim) {
			l.fail(PackFile, "context.scopes."+dim, "%q is not a dimension of any of the pack's knowledge sets", dim)
		}
		c.Scopes[dim] = r
	}
	c.scopeDims = c.compiledScopeDims()
}

func (l *packLoader) isDimension(dim string) bool {
	for _, spec := range l.p.Sets {
		if slices.Contains(spec.Dimensions, dim) {
			return true
		}
	}
	for _, s := range l.p.sets {
		if slices.Contains(s.Dimensions, dim) {
			return true
		}
	}
	return false
}

func (l *packLoader) facts() {
	f := l.p.Facts
	if f == nil {
		return
	}
	if f.Version == "" {
		l.fail(PackFile, "facts.version", "missing (it keys the fact index cache; change it when the rules change meaning)")
	}
	if f.MaxLines < 0 {
		l.fail(PackFile, "facts.max_lines", "must not be negative")
	}
	if f.Duration != "" {
		f.DurationRe = l.compile("facts.duration", f.Duration, "time")
	}
	if len(f.Ops) == 0 && len(f.Records) == 0 {
		l.fail(PackFile, "facts", "no operation rules (ops) and no records: declare at least one")
	}
	fields := map[string][]string{} // op -> fields its rules capture
	for i := range f.Ops {
		r := &f.Ops[i]
		key := fmt.Sprintf("facts.ops[%d]", i)
		if r.Op == "" {
			l.fail(PackFile, key+".op", "missing operation name")
		}
		r.Re = l.compile(key+".regex", r.Regex, "time")
		if r.Re == nil {
			continue
		}
		for _, g := range r.Re.SubexpNames() {
			if g == "" {
				continue
			}
			if !slices.Contains(opFields, g) {
				l.fail(PackFile, key+".regex", "unknown group %q (groups: %s)", g, strings.Join(opFields, ", "))
				continue
			}
			if !slices.Contains(fields[r.Op], g) {
				fields[r.Op] = append(fields[r.Op], g)
			}
		}
		hasUnits := r.Re.SubexpIndex("units") >= 0
		switch {
		case hasUnits && r.Units == "":
			l.fail(PackFile, key+".units", "the regex has a units group, so a units regex (one group: one UnitId) is needed")
		case !hasUnits && r.Units != "":
			l.fail(PackFile, key+".units", "set, but the regex has no units group")
		case hasUnits:
			r.UnitsRe = l.compile(key+".units", r.Units)
			if r.UnitsRe != nil && r.UnitsRe.NumSubexp() < 1 {
				l.fail(PackFile, key+".units", "needs a group capturing one UnitId")
			}
			if !slices.Contains(fields[r.Op], "unit") {
				fields[r.Op] = append(fields[r.Op], "unit") // each UnitId of the list is a unit
			}
		}
	}
	for _, role := range sortedKeys(f.Roles) {
		for _, op := range f.Roles[role] {
			if _, ok := fields[op]; !ok {
				l.fail(PackFile, "facts.roles."+role, "operation %q has no rule in facts.ops", op)
			}
		}
	}
	for _, typ := range sortedKeys(f.Evidence) {
		have, ok := fields[typ]
		if !ok {
			l.fail(PackFile, "facts.evidence."+typ, "evidence type %q matches operations of the same name, but facts.ops has no %q rule", typ, typ)
			continue
		}
		for _, param := range f.Evidence[typ] {
			if param == "time" || param == "units" || !slices.Contains(have, param) {
				l.fail(PackFile, "facts.evidence."+typ, "parameter %q is not a field the %q rules capture (%s)", param, typ, strings.Join(without(have, "time", "units"), ", "))
			}
		}
	}
}

func (l *packLoader) claims() {
	c := l.p.Claims
	if c == nil {
		return
	}
	if strings.TrimSpace(c.Marker) == "" {
		l.fail(PackFile, "claims.marker", "missing")
	}
	if text, ok := l.read("claims.contract", c.Contract); ok {
		c.ContractText = text
		if c.Marker != "" && !strings.Contains(text, c.Marker) {
			l.fail(c.Contract, "", "the contract text never mentions the marker %q", c.Marker)
		}
	}
	l.claimKinds(c)
	l.claimsContract(c)
	for _, list := range sortedKeys(c.Caps) {
		if !slices.Contains(claimLists, list) {
			l.fail(PackFile, "claims.caps."+list, "unknown claim list (want %s)", strings.Join(claimLists, ", "))
		} else if c.Caps[list] <= 0 {
			l.fail(PackFile, "claims.caps."+list, "must be positive, got %d", c.Caps[list])
		}
	}
	for _, level := range sortedKeys(c.Levels) {
		if !slices.Contains(evidenceLevels, level) {
			l.fail(PackFile, "claims.levels."+level, "unknown evidence level (want one of %q)", evidenceLevels)
		}
		for _, sp := range c.Levels[level] {
			if strings.TrimSpace(sp) == "" {
				l.fail(PackFile, "claims.levels."+level, "empty spelling")
			}
		}
	}
}

// RevisionIssue is one issue as the revision template shows it.
type RevisionIssue struct {
	// N numbers the issues from 1.
	N int
	// Code is the stable issue code; templates should not show it to the model.
	Code string
	// Path locates the claim ("unitClaims[2]").
	Path string
	// Message and Recommendation are the rendered texts of the pack's messages.
	Message        string
	Recommendation string
}

// RevisionData is what the revision and repair templates execute over.
type RevisionData struct {
	// Issues are the issues to fix, numbered.
	Issues []RevisionIssue
	// Facts are the relevant facts, as lines of the source text.
	Facts []string
	// FactsOmitted counts relevant fact lines left out by the bound.
	FactsOmitted int
	// Marker is the claims block marker ("[机器可读声明]"); empty when the pack
	// has no claims contract.
	Marker string
}

func sampleRevisionData(marker string) RevisionData {
	return RevisionData{
		Issues:       []RevisionIssue{{N: 1, Code: "sample", Path: "unitClaims[0]", Message: "m", Recommendation: "r"}},
		Facts:        []string{"0:01.00 A x"},
		FactsOmitted: 1,
		Marker:       marker,
	}
}

func (l *packLoader) revision() {
	r := l.p.Revision
	if r == nil {
		return
	}
	marker := ""
	if l.p.Claims != nil {
		marker = l.p.Claims.Marker
	}
	if text, ok := l.read("revision.template", r.Template); ok {
		r.TemplateText = text
		r.Tmpl = l.template(r.Template, "", text, sampleRevisionData(marker))
	}
	if r.RepairTemplate != "" {
		if text, ok := l.read("revision.repair_template", r.RepairTemplate); ok {
			r.RepairTemplateText = text
			r.RepairTmpl = l.template(r.RepairTemplate, "", text, sampleRevisionData(marker))
		}
	} else if l.p.Claims != nil {
		l.fail(PackFile, "revision.repair_template", "missing: a pack with a claims contract needs a repair template")
	}
	for i, ph := range r.LeakPhrases {
		if strings.TrimSpace(ph) == "" {
			l.fail(PackFile, fmt.Sprintf("revision.leak_phrases[%d]", i), "empty phrase")
		}
	}
	if r.NoticeTemplate != "" {
		if text, ok := l.read("revision.notice_template", r.NoticeTemplate); ok {
			r.NoticeTemplateText = text
			if t := l.template(r.NoticeTemplate, "", text, SampleNoticeData()); t != nil {
				// A notice that says nothing for problems that survived would hide them.
				problem := checkNoticeTemplate(func(d NoticeData) (string, error) {
					var b strings.Builder
					err := t.Execute(&b, d)
					return b.String(), err
				})
				if problem != "" {
					l.fail(r.NoticeTemplate, "", "%s", problem)
				} else {
					r.NoticeTmpl = t
				}
			}
		}
	}
}

var answerFieldTypes = []string{"string", "number", "boolean"}

func (l *packLoader) answer() {
	a := l.p.Answer
	if a == nil {
		return
	}
	if len(a.Fields) == 0 {
		l.fail(PackFile, "answer.fields", "no fields")
	}
	for _, f := range sortedKeys(a.Fields) {
		if !slices.Contains(answerFieldTypes, a.Fields[f]) {
			l.fail(PackFile, "answer.fields."+f, "unknown type %q (want %s)", a.Fields[f], strings.Join(answerFieldTypes, ", "))
		}
	}
	for _, f := range sortedKeys(a.Enums) {
		if a.Fields[f] != "string" {
			l.fail(PackFile, "answer.enums."+f, "an enum needs a string field %q in answer.fields", f)
		}
		if len(a.Enums[f]) == 0 {
			l.fail(PackFile, "answer.enums."+f, "no values")
		}
	}
	if text, ok := l.read("answer.contract", a.Contract); ok {
		a.ContractText = text
	}
}

// GuidanceData is what a semantic validator's guidance templates execute over.
type GuidanceData struct {
	// Proposed is the value the answer proposed ("narrative").
	Proposed string
	// Explanation is the validator model's explanation, bounded.
	Explanation string
	// Target is what the value must become (the verdict's target).
	Target string
}

func (l *packLoader) semantic() {
	p := l.p
	names := map[string]bool{}
	for i := range p.Semantic {
		s := &p.Semantic[i]
		key := fmt.Sprintf("semantic[%d]", i)
		if s.Name == "" {
			l.fail(PackFile, key+".name", "missing")
		} else if names[s.Name] {
			l.fail(PackFile, key+".name", "duplicate validator name %q", s.Name)
		}
		names[s.Name] = true
		if s.Source.Message != "last_user" {
			l.fail(PackFile, key+".source.message", "unknown source %q (want last_user)", s.Source.Message)
		}
		if s.Source.Regex != "" {
			s.Source.Re = l.compile(key+".source.regex", s.Source.Regex, "value")
		}
		var enum []string
		if s.Proposed == "" {
			l.fail(PackFile, key+".proposed", "missing (a gjson path into the answer, like kind)")
		} else if p.Answer != nil {
			if _, ok := p.Answer.Fields[s.Proposed]; !ok {
				l.fail(PackFile, key+".proposed", "%q is not a field of answer.fields", s.Proposed)
			}
			enum = p.Answer.Enums[s.Proposed]
		}
		if text, ok := p.AssetText[s.Policy]; ok {
			s.PolicyText = text
		} else {
			l.fail(PackFile, key+".policy", "names asset %q, which assets does not declare", s.Policy)
		}
		if text, ok := l.read(key+".instruction", s.Instruction); ok {
			s.InstructionText = text
		}
		if s.MaxExplanation <= 0 {
			l.fail(PackFile, key+".max_explanation", "must be positive")
		}
		l.verdicts(s, key, enum)
		if s.Evaluation != nil {
			l.evaluation(s.Evaluation, key+".evaluation", s.Proposed, enum)
		}
	}
}

// evaluation checks a validator's label mapping against the answer's enum and
// opens its labelled set.
func (l *packLoader) evaluation(e *EvaluationSpec, key, proposed string, enum []string) {
	for _, f := range []struct{ key, name string }{{"label", e.Label}, {"correct", e.Correct}} {
		switch {
		case f.name == "":
			l.fail(PackFile, key+"."+f.key, "missing (the name of the labelled chunks' field)")
		case slices.Contains(ChunkFields, f.name):
			l.fail(PackFile, key+"."+f.key, "%q is a field every chunk has already (%s)", f.name, strings.Join(ChunkFields, ", "))
		}
	}
	if e.Label != "" && e.Label == e.Correct {
		l.fail(PackFile, key+".correct", "%q is also the label field", e.Correct)
	}
	inEnum := func(k, v string) {
		if enum != nil && !slices.Contains(enum, v) {
			l.fail(PackFile, k, "value %q is not one of answer.enums.%s %v", v, proposed, enum)
		}
	}
	if len(e.Positive) == 0 {
		l.fail(PackFile, key+".positive", "missing (the proposed values that agree with a true label)")
	}
	for _, v := range e.Positive {
		inEnum(key+".positive", v)
	}
	switch w := e.Wrong.WhenTrue; {
	case w == "":
		l.fail(PackFile, key+".wrong.when_true", "missing (the wrong proposal for a chunk labelled true)")
	case e.Agrees(w):
		l.fail(PackFile, key+".wrong.when_true", "%q agrees with a true label (it is in positive): the wrong proposal must not", w)
	default:
		inEnum(key+".wrong.when_true", w)
	}
	switch w := e.Wrong.WhenFalse; {
	case w == "":
		l.fail(PackFile, key+".wrong.when_false", "missing (the wrong proposal for a chunk labelled false)")
	case !e.Agrees(w):
		l.fail(PackFile, key+".wrong.when_false", "%q agrees with a false label (it is not in positive): the wrong proposal must not", w)
	default:
		inEnum(key+".wrong.when_false", w)
	}
	if e.Set == "" {
		return
	}
	dir := path.Join(l.dir, e.Set)
	if !fs.ValidPath(dir) || strings.HasPrefix(path.Clean(e.Set), "..") || path.IsAbs(e.Set) {
		l.fail(PackFile, key+".set", "folder %q must be a relative path inside the pack folder", e.Set)
		return
	}
	sub, err := fs.Sub(l.fsys, dir)
	if err == nil {
		var names []string
		if names, err = fs.Glob(sub, "*.json"); err == nil && len(names) == 0 {
			err = errors.New("no *.json chunk files")
		}
	}
	if err != nil {
		l.fail(PackFile, key+".set", "folder %q: %v", e.Set, unwrapPathError(err))
		return
	}
	e.SetFS = sub
}

func (l *packLoader) verdicts(s *SemanticSpec, key string, enum []string) {
	approving := 0
	seen := map[string]bool{}
	for j, v := range s.Verdicts {
		vk := fmt.Sprintf("%s.verdicts[%d]", key, j)
		if v.Name == "" {
			l.fail(PackFile, vk+".name", "missing")
		} else if seen[v.Name] {
			l.fail(PackFile, vk+".name", "duplicate verdict %q", v.Name)
		}
		seen[v.Name] = true
		if v.Approves {
			approving++
			if len(v.WhenProposed) > 0 || len(v.WhenNotProposed) > 0 || v.Target != "" {
				l.fail(PackFile, vk, "the approving verdict is consistent with any proposal; it takes no when_proposed, when_not_proposed or target")
			}
			continue
		}
		if v.Target == "" {
			l.fail(PackFile, vk+".target", "missing (what the value must become)")
		}
		if len(v.WhenProposed) == 0 && len(v.WhenNotProposed) == 0 {
			l.fail(PackFile, vk, "a rejecting verdict needs when_proposed or when_not_proposed")
		}
		for _, val := range append(slices.Clone(v.WhenProposed), v.WhenNotProposed...) {
			if enum != nil && !slices.Contains(enum, val) {
				l.fail(PackFile, vk, "value %q is not one of answer.enums.%s %v", val, s.Proposed, enum)
			}
		}
		if _, ok := s.Guidance[v.Name]; !ok {
			l.fail(PackFile, key+".guidance", "no guidance for rejecting verdict %q", v.Name)
		}
	}
	if len(s.Verdicts) > 0 && approving != 1 {
		l.fail(PackFile, key+".verdicts", "exactly one verdict must approve, got %d", approving)
	}
	if len(s.Verdicts) < 2 {
		l.fail(PackFile, key+".verdicts", "need an approving and at least one rejecting verdict")
	}
	s.GuidanceTmpl = map[string]*template.Template{}
	for _, name := range sortedKeys(s.Guidance) {
		i := slices.IndexFunc(s.Verdicts, func(v VerdictSpec) bool { return v.Name == name })
		if i < 0 || s.Verdicts[i].Approves {
			l.fail(PackFile, key+".guidance."+name, "not a rejecting verdict of this validator")
			continue
		}
		if t := l.template(PackFile, key+".guidance."+name, s.Guidance[name], GuidanceData{}); t != nil {
			s.GuidanceTmpl[name] = t
		}
	}
}

func (l *packLoader) applies() {
	a := l.p.ApplyRules
	if a == nil {
		return
	}
	if a.Facts && l.p.Facts == nil {
		l.fail(PackFile, "applies.facts", "true, but the pack has no facts rules to read operations with")
	}
	if a.Marker && l.p.Claims == nil {
		l.fail(PackFile, "applies.marker", "true, but the pack has no claims contract, so no marker")
	}
	if a.UserLine != "" {
		if a.UserLineRe = l.compile("applies.user_line", a.UserLine); a.UserLineRe != nil {
			a.userLineStart = lineStartOf(a.UserLine)
			a.userLineSeen = newLineMemo[struct{}]()
		}
	}
	if a.Facts && l.p.Facts != nil {
		a.opStart = &lineStart{}
		for _, op := range l.p.Facts.Ops {
			a.opStart.union(lineStartOf(op.Regex))
		}
		a.opSeen = newLineMemo[struct{}]()
	}
	if a.Session && l.p.Facts == nil {
		l.fail(PackFile, "applies.session", "true, but the pack has no facts rules: a session has no facts to check against")
	}
	if a.Records && (l.p.Facts == nil || len(l.p.Facts.Records) == 0) {
		l.fail(PackFile, "applies.records", "true, but the pack declares no facts.records")
	}
	if !a.Facts && !a.Marker && a.UserLine == "" && !a.Session && !a.Records {
		l.fail(PackFile, "applies", "no condition: set facts, records, marker, user_line or session (or leave applies out: the pack then applies to every request)")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

func without(list []string, drop ...string) []string {
	var out []string
	for _, s := range list {
		if !slices.Contains(drop, s) {
			out = append(out, s)
		}
	}
	return out
}
