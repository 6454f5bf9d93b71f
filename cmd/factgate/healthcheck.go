package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

func init() {
	register("healthcheck", "exit 0 when a factgate's /healthz answers (for container healthchecks)", runHealthcheck)
}

func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080/healthz", "the health endpoint")
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: factgate healthcheck [--url URL] [--timeout 2s]")
		fmt.Fprintln(stderr, "\nExits 0 when URL answers 200, 1 otherwise. The Docker image's HEALTHCHECK uses it.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", *url, nil)
	if err != nil {
		fmt.Fprintln(stderr, "factgate healthcheck:", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "factgate healthcheck:", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		fmt.Fprintf(stderr, "factgate healthcheck: %s answered %d\n", *url, resp.StatusCode)
		return 1
	}
	return 0
}
