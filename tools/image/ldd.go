package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// sharedLibs runs ldd on program and returns the absolute paths of the
// shared libraries it loads, the dynamic loader included, sorted; none for
// a static program. A library ldd cannot find is an error: the image would
// not run.
func sharedLibs(program string) ([]string, error) {
	cmd := exec.Command("ldd", program)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String() + stderr.String()
	if strings.Contains(out, "not a dynamic executable") || strings.Contains(out, "statically linked") {
		return nil, nil
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("ldd %s: %v: %s", program, err, strings.TrimSpace(out))
		}
		return nil, fmt.Errorf("ldd %s: %w (ldd, from glibc, must be installed)", program, err)
	}
	return parseLDD(stdout.String())
}

// parseLDD reads ldd's output: "name => /path (0xaddr)" for a library,
// "/path (0xaddr)" for the loader, "name (0xaddr)" for the vDSO (skipped),
// "name => not found" for a missing library.
func parseLDD(out string) ([]string, error) {
	seen := map[string]bool{}
	var libs []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, target, arrow := strings.Cut(line, "=>")
		p := strings.TrimSpace(name)
		if arrow {
			p = strings.TrimSpace(target)
		}
		if strings.HasPrefix(p, "not found") {
			return nil, fmt.Errorf("shared library %s: not found on this machine", strings.TrimSpace(name))
		}
		if i := strings.Index(p, " (0x"); i >= 0 {
			p = p[:i]
		}
		if !filepath.IsAbs(p) {
			if arrow {
				return nil, fmt.Errorf("ldd: cannot read line %q", line)
			}
			continue // linux-vdso.so.1: in the kernel, not a file
		}
		if !seen[p] {
			seen[p] = true
			libs = append(libs, filepath.Clean(p))
		}
	}
	sort.Strings(libs)
	return libs, nil
}
