package main

import (
	"context"
	"io"
)

func runPackInit(_ context.Context, args []string, stdout, stderr io.Writer) int { return 2 }
