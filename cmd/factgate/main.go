// Command factgate is the factgate proxy and its tools, one binary with subcommands.
//
//	factgate serve --config configs/factgate.yaml
//	factgate demo
//
// Run "factgate help" for the list.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand. run gets the arguments after the subcommand's name and
// returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands maps a subcommand's name ("config check" for nested ones) to it. Each
// file of this package registers its commands in an init function.
var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	commands[name] = command{summary: summary, run: run}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to the subcommand named by the first one or two arguments.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	if len(args) >= 2 {
		if c, ok := commands[args[0]+" "+args[1]]; ok {
			return c.run(ctx, args[2:], stdout, stderr)
		}
	}
	if c, ok := commands[args[0]]; ok {
		return c.run(ctx, args[1:], stdout, stderr)
	}
	var group []string
	for name := range commands {
		if strings.HasPrefix(name, args[0]+" ") {
			group = append(group, name)
		}
	}
	if len(group) > 0 {
		sort.Strings(group)
		fmt.Fprintf(stderr, "factgate %s: which one? %s\n", args[0], strings.Join(group, ", "))
		return 2
	}
	fmt.Fprintf(stderr, "factgate: unknown command %q (run \"factgate help\")\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "factgate — an OpenAI-compatible proxy that checks answers against facts and repairs them.")
	fmt.Fprintln(w, "\nUsage: factgate <command> [flags]   (each command has --help)\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-22s %s\n", n, commands[n].summary)
	}
}
