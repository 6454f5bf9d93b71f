package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/knowledge"
)

func init() {
	register("check", "validate an answer file against an operation log offline (--facts LOG --answer FILE; exit 1 on contradictions)", runCheck)
}

// Exit statuses of factgate check.
const (
	checkClean  = 0 // no Contradiction or Fatal issue
	checkFailed = 1 // at least one Contradiction or Fatal issue
	checkUsage  = 2 // the check could not run: bad flags, unreadable or oversized input
)

// fileList collects a repeated flag.
type fileList []string

func (l *fileList) String() string     { return strings.Join(*l, ", ") }
func (l *fileList) Set(v string) error { *l = append(*l, v); return nil }

func runCheck(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("factgate check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: factgate check --facts LOG [--facts PART2 ...] --answer FILE [--format text|json]
       [--set NAME] [--factions A,B] [--map ID] [--tolerance 500ms] [--optional-claims]
       [--pack NAME] [--packs DIR]

Checks a model's answer (with its machine-readable claims block) against the facts
of an operation log, offline, exactly as the proxy validates a draft: the claims
format, every deterministic rule of the pack, messages in the pack's language.
Several --facts are the segments of one session, in the order they were sent; they
are merged as the proxy merges a session. The knowledge set and the scopes (factions
in player order, map) come from the first segment's header lines unless flags say
otherwise. --answer - reads the answer from standard input.

The facts may total at most 16 MiB; larger logs are refused, never truncated (a cut
log would make every later citation "not in the replay").

Output: one line per issue (severity, code, path, message) and a summary, or with
--format json exactly {"issues":[{"code","severity","path","message","recommendation"}...]}.
Exit status: 0 no Contradiction or Fatal issue, 1 at least one, 2 the check could
not run (usage, unreadable or oversized input).

Flags:
`)
		fs.PrintDefaults()
	}
	var factFiles fileList
	fs.Var(&factFiles, "facts", "operation log file (repeat for the segments of one session, in order)")
	answerFile := fs.String("answer", "", "answer file to check (- for standard input)")
	format := fs.String("format", "text", "output format: text or json")
	setName := fs.String("set", "", "knowledge set (default: from the log's header, else the pack's default)")
	factions := fs.String("factions", "", "comma-separated factions in player order (default: from the log's header)")
	mapID := fs.String("map", "", "map scope value (default: from the log's header)")
	tolerance := fs.String("tolerance", "", "evidence time tolerance, inclusive (default 500ms)")
	optional := fs.Bool("optional-claims", false, "a missing claims block is a Warning, not Fatal")
	packName := fs.String("pack", "", "pack whose rules read the log (default: the one of --set, else the only pack with fact rules)")
	packs := fs.String("packs", "", "folder of user packs to load besides the built-in ones")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "factgate check: "+format+"\n", args...)
		return checkUsage
	}
	switch {
	case fs.NArg() > 0:
		return fail("unexpected arguments %q", fs.Args())
	case len(factFiles) == 0 || *answerFile == "":
		fs.Usage()
		return checkUsage
	case *format != "text" && *format != "json":
		return fail("--format %q: want text or json", *format)
	}
	var cfg validate.Config
	if *tolerance != "" {
		d, err := units.ParseDuration(*tolerance)
		if err != nil {
			return fail("--tolerance: %v", err)
		}
		cfg.TimeTolerance = &d
	}
	if *optional {
		no := false
		cfg.RequireClaims = &no
	}
	reg, err := knowledge.LoadRegistry(*packs)
	if err != nil {
		return fail("loading packs: %v", err)
	}
	off, err := validate.NewOffline(reg.Packs(), reg.Set, validate.OfflineOptions{Config: cfg})
	if err != nil {
		return fail("%v", err)
	}

	req := validate.CheckRequest{Pack: *packName, KnowledgeSet: *setName}
	total := 0
	for _, name := range factFiles {
		text, err := readBounded(name, off.MaxFactsBytes()-total, factsRule)
		if err != nil {
			return fail("--facts %s: %v", name, err)
		}
		total += len(text)
		req.Facts = append(req.Facts, text)
	}
	if req.Answer, err = readBounded(*answerFile, maxAnswerBytes, fmt.Sprintf("the limit is %d MiB for an answer", maxAnswerBytes>>20)); err != nil {
		return fail("--answer %s: %v", *answerFile, err)
	}
	if *factions != "" || *mapID != "" {
		req.Scopes = knowledge.Scopes{}
		if *factions != "" {
			req.Scopes["factions"] = splitList(*factions)
		}
		if *mapID != "" {
			req.Scopes["maps"] = splitList(*mapID)
		}
	}
	rep, err := off.Check(req)
	if err != nil {
		if e := interceptors.AsError(err); e != nil {
			return fail("%s", e.Message)
		}
		return fail("%v", err)
	}
	if *format == "json" {
		stdout.Write(validate.MarshalIssues(rep.Issues))
		fmt.Fprintln(stdout)
	} else if err := validate.WriteText(stdout, rep); err != nil {
		return fail("%v", err)
	}
	if validate.Failing(rep.Issues) {
		return checkFailed
	}
	return checkClean
}

// maxAnswerBytes bounds the answer file.
const maxAnswerBytes = 16 << 20

// factsRule is the facts size rule as the error states it.
var factsRule = fmt.Sprintf("the limit is %d bytes (%d MiB) for all facts together: split the log or check a part of it",
	validate.DefaultMaxFactsBytes, validate.DefaultMaxFactsBytes>>20)

// readBounded reads a file ("-": standard input) of at most limit bytes; a larger
// one is refused (before it is read, when its size is known) with an error that
// states rule.
func readBounded(name string, limit int, rule string) (string, error) {
	limit = max(limit, 0)
	tooLarge := func(size int64, exact bool) error {
		more := " or more"
		if exact {
			more = ""
		}
		return fmt.Errorf("%d bytes%s is too large; %s", size, more, rule)
	}
	var r io.Reader
	if name == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > int64(limit) {
			return "", tooLarge(st.Size(), true)
		}
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return "", err
	}
	if len(b) > limit {
		return "", tooLarge(int64(len(b)), false)
	}
	return string(b), nil
}
