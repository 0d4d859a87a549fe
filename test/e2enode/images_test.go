package e2enode_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// images are the archives imported into the real node's containerd.
type images struct {
	tessera, tesseraRef string
	pause               string
	probe, probeRef     string
}

// buildImages builds Tessera's image and the pause image with `make image`
// (the command the README gives platform engineers) and packs the probe
// program with the same image tool.
func buildImages(t *testing.T) images {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	run(t, root, nil, "make", "-s", "--no-print-directory", "image", "IMAGE_DIR="+dir)
	ref, err := os.ReadFile(filepath.Join(dir, "tessera-image.ref"))
	if err != nil {
		t.Fatalf("make image wrote no image reference: %v", err)
	}
	probeBin := filepath.Join(dir, "probe")
	run(t, root, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", probeBin, "./test/e2enode/probe")
	const probeRef = "tessera.io/e2e/probe:1"
	probeTar := filepath.Join(dir, "probe-image.tar")
	run(t, filepath.Join(root, "tools", "image"), nil, "go", "run", ".", "-ref", probeRef, "-out", probeTar,
		"-epoch", "0", "-add", "/probe="+probeBin, "-entrypoint", "/probe")
	return images{
		tessera: filepath.Join(dir, "tessera-image.tar"), tesseraRef: strings.TrimSpace(string(ref)),
		pause: filepath.Join(dir, "pause-image.tar"),
		probe: probeTar, probeRef: probeRef,
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
