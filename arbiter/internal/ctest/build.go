package ctest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// libCFlags are intercept/Makefile's CFLAGS.
func libCFlags() []string {
	return []string{
		"-std=c11", "-D_GNU_SOURCE", "-fPIC", "-fvisibility=hidden", "-pthread",
		"-Wall", "-Wextra", "-Werror", "-O2", "-g",
	}
}

// progCFlags build the fakes and tprog, as intercept_test.go does.
func progCFlags() []string {
	return []string{"-std=c11", "-D_GNU_SOURCE", "-pthread", "-Wall", "-Wextra", "-Werror", "-O2"}
}

// Build is a compiled set: the library, the fakes and tprog in Dir.
type Build struct {
	Dir, Lib, Tprog string
}

// InterceptDir returns the repository's intercept/ folder.
func InterceptDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("ctest: cannot locate the source file")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "intercept")
	if _, err := os.Stat(filepath.Join(dir, "src", "shm_layout.h")); err != nil {
		return "", fmt.Errorf("ctest: intercept sources: %w", err)
	}
	return dir, nil
}

// HaveGCC reports whether gcc is on PATH.
func HaveGCC() bool {
	_, err := exec.LookPath("gcc")
	return err == nil
}

// Compile builds everything into dir.
func Compile(ctx context.Context, dir string) (Build, error) {
	src, err := InterceptDir()
	if err != nil {
		return Build{}, err
	}
	b := Build{Dir: dir, Lib: filepath.Join(dir, "libtessera-intercept.so"), Tprog: filepath.Join(dir, "tprog")}
	srcs, err := filepath.Glob(filepath.Join(src, "src", "*.c"))
	if err != nil || len(srcs) == 0 {
		return b, fmt.Errorf("ctest: no C sources in %s/src: %v", src, err)
	}
	inc := "-I" + filepath.Join(src, "src")
	steps := [][]string{
		join(libCFlags(), []string{"-shared", "-Wl,-z,defs", "-Wl,-z,now", "-o", b.Lib}, srcs, []string{"-ldl"}),
		join(progCFlags(), []string{inc, "-fPIC", "-shared", "-Wl,-Bsymbolic", "-Wl,-soname,libcuda.so.1",
			"-o", filepath.Join(dir, "libcuda.so.1"), filepath.Join(src, "testdata", "fake", "fake_cuda.c")}),
		join(progCFlags(), []string{inc, "-fPIC", "-shared", "-Wl,-Bsymbolic", "-Wl,-soname,libnvidia-ml.so.1",
			"-o", filepath.Join(dir, "libnvidia-ml.so.1"), filepath.Join(src, "testdata", "fake", "fake_nvml.c")}),
		join(progCFlags(), []string{inc, "-o", b.Tprog, filepath.Join(src, "testdata", "progs", "tprog.c"), "-L" + dir,
			"-l:libcuda.so.1", "-l:libnvidia-ml.so.1", "-ldl"}),
	}
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, "gcc", args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return b, fmt.Errorf("ctest: gcc %s: %w\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	return b, nil
}

// Env is the environment for tprog under the library; extra adds "K=V".
func (b Build) Env(shmDir, containerID string, extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"LD_LIBRARY_PATH=" + b.Dir,
		"LD_PRELOAD=" + b.Lib,
		"TESSERA_SHM_DIR=" + shmDir,
		"TESSERA_CONTAINER_ID=" + containerID,
	}, extra...)
}

func join(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
