package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfiles starts a pprof CPU profile into cpuPath (when not empty) and returns
// a function that stops it and writes a heap profile into memPath (when not empty).
// The heap profile holds both what is in use at that moment and everything
// allocated since the process started (go tool pprof -sample_index=alloc_space).
// The returned function must run once the server has shut down, so that the
// profiles cover the whole run and are flushed before the process exits.
func startProfiles(cpuPath, memPath string) (stop func() error, err error) {
	var cpu *os.File
	if cpuPath != "" {
		if cpu, err = os.Create(cpuPath); err != nil {
			return nil, fmt.Errorf("--cpu-profile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, fmt.Errorf("--cpu-profile: %w", err)
		}
	}
	if memPath != "" {
		// Fail before serving, not at shutdown, when the file cannot be written.
		f, err := os.Create(memPath)
		if err != nil {
			if cpu != nil {
				pprof.StopCPUProfile()
				cpu.Close()
			}
			return nil, fmt.Errorf("--mem-profile: %w", err)
		}
		f.Close()
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				errs = append(errs, fmt.Errorf("--cpu-profile: %w", err))
			}
		}
		if memPath != "" {
			if err := writeHeapProfile(memPath); err != nil {
				errs = append(errs, fmt.Errorf("--mem-profile: %w", err))
			}
		}
		return errors.Join(errs...)
	}, nil
}

// writeHeapProfile writes the heap profile after a collection, so that its in-use
// figures are those of the last completed cycle rather than of an earlier one.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
