package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/factgate/factgate/proxy"
)

func init() {
	register("serve", "run the proxy (--config FILE)", runServe)
	register("config check", "validate a config file without serving", runConfigCheck)
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "configs/factgate.yaml", "config file (YAML)")
	listen := fs.String("listen", "", "listen address, overriding server.listen")
	logLevel := fs.String("log-level", "", "debug, info, warn or error, overriding log.level")
	cpuProfile := fs.String("cpu-profile", "", "write a pprof CPU profile of the whole run to `FILE` (flushed on SIGTERM/SIGINT)")
	memProfile := fs.String("mem-profile", "", "write a pprof heap profile to `FILE` on shutdown (in use, and allocated since start)")
	var upstreamURLs []string
	fs.Func("upstream", "NAME=URL: point upstream NAME at base URL URL, overriding its base_url (repeatable;\ne.g. main=http://127.0.0.1:9090/v1 for the mock upstream)", func(v string) error {
		if name, u, ok := strings.Cut(v, "="); !ok || name == "" || u == "" {
			return fmt.Errorf("want NAME=URL, got %q", v)
		}
		upstreamURLs = append(upstreamURLs, v)
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: factgate serve [--config FILE] [--listen ADDR] [--log-level LEVEL] [--upstream NAME=URL]...")
		fmt.Fprintln(stderr, "                     [--cpu-profile FILE] [--mem-profile FILE]")
		fmt.Fprintln(stderr, "\nRuns the proxy until SIGTERM or SIGINT, then drains in-flight requests.")
		fmt.Fprintln(stderr, "Secrets come from the environment variables the config names (FACTGATE_*).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	cfg, err := proxy.LoadConfig(*configPath)
	if err != nil {
		fmt.Fprintln(stderr, "factgate serve:", err)
		return 1
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
	}
	for _, v := range upstreamURLs {
		name, u, _ := strings.Cut(v, "=")
		if err := cfg.SetUpstreamURL(name, u); err != nil {
			fmt.Fprintln(stderr, "factgate serve: --upstream:", err)
			return 2
		}
	}
	if *logLevel != "" {
		cfg.Log.Level = *logLevel
		if err := cfg.Validate(); err != nil {
			fmt.Fprintln(stderr, "factgate serve:", err)
			return 2
		}
	}
	srv, err := proxy.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "factgate serve:", err)
		return 1
	}
	// The garbage collector keeps the heap within the configured budgets.
	proxy.ApplyMemoryLimit(srv)
	stopProfiles, err := startProfiles(*cpuProfile, *memProfile)
	if err != nil {
		fmt.Fprintln(stderr, "factgate serve:", err)
		return 1
	}
	code := 0
	if err := srv.ListenAndServe(ctx); err != nil {
		fmt.Fprintln(stderr, "factgate serve:", err)
		code = 1
	}
	// After the graceful shutdown, so the profiles cover every drained request.
	if err := stopProfiles(); err != nil {
		fmt.Fprintln(stderr, "factgate serve:", err)
		code = 1
	}
	return code
}

func runConfigCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: factgate config check FILE...")
		fmt.Fprintln(stderr, "\nDecodes each config strictly and builds everything it names (routes, knowledge,")
		fmt.Fprintln(stderr, "interceptors) without serving. Missing secrets are reported as warnings.")
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	code := 0
	for _, path := range fs.Args() {
		warnings, err := proxy.CheckConfig(path)
		for _, w := range warnings {
			fmt.Fprintf(stdout, "%s: warning: %s\n", path, w)
		}
		if err != nil {
			fmt.Fprintln(stdout, err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: ok\n", path)
	}
	return code
}

// flagExit maps a flag parsing error to an exit code (0 for --help).
func flagExit(err error) int {
	if err == flag.ErrHelp {
		return 0
	}
	return 2
}
