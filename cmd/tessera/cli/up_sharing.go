package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/arbiter/mps"
	"github.com/tessera-gpu/tessera/inventory"
)

// The --sharing values, the node agent's names for the two modes.
const (
	sharingShared = "shared"
	sharingMPS    = "mps"
)

// sharingMode reads --sharing, and refuses the MPS flags without mps.
func sharingMode(o upOptions) (arbiter.Mode, error) {
	var mode arbiter.Mode
	switch o.sharing {
	case sharingShared:
		mode = arbiter.ModeTokens
	case sharingMPS:
		mode = arbiter.ModeMPS
	default:
		return 0, fmt.Errorf("--sharing: must be %s or %s, got %q", sharingShared, sharingMPS, o.sharing)
	}
	if mode != arbiter.ModeMPS {
		for _, f := range [][2]string{{"--mps-root", o.mpsRoot}, {"--mps-control", o.mpsControl}} {
			if f[1] != "" {
				return 0, fmt.Errorf("%s: only with --sharing %s, got --sharing %s", f[0], sharingMPS, o.sharing)
			}
		}
	}
	return mode, nil
}

// mpsConfig sets up the MPS control daemons of --sharing mps, one per GPU:
// their root folder (created owner-only when missing) and control program.
// Simulated GPUs have no MPS, so there the program must be given (a
// stand-in, for tests).
func mpsConfig(o upOptions, stateDir, source string, simulated bool, nodes []inventory.Node) (mps.Config, error) {
	bin := o.mpsControl
	switch {
	case bin != "":
		abs, err := filepath.Abs(bin)
		if err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(abs); err == nil && (fi.IsDir() || fi.Mode()&0o111 == 0) {
				err = errors.New("not an executable file")
			}
		}
		if err != nil {
			return mps.Config{}, usageError("--mps-control: must be an executable file, got %q (%v)", bin, err)
		}
		bin = abs
	case simulated:
		return mps.Config{}, usageError("--sharing %s: needs NVIDIA GPUs and their driver's MPS; this host's GPUs are simulated (%s). Use --sharing %s, or give --mps-control PATH to run a stand-in control program (tests)",
			sharingMPS, source, sharingShared)
	default:
		found, err := exec.LookPath(mps.DefaultBinary)
		if err != nil {
			return mps.Config{}, fmt.Errorf("--mps-control: %s not found on PATH (it comes with the NVIDIA driver); give its path: %w", mps.DefaultBinary, err)
		}
		if bin, err = filepath.Abs(found); err != nil {
			return mps.Config{}, fmt.Errorf("--mps-control: %w", err)
		}
	}
	root := o.mpsRoot
	if root == "" {
		root = filepath.Join(stateDir, "mps")
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return mps.Config{}, fmt.Errorf("--mps-root: %w", err)
	}
	cfg := mps.Config{Binary: bin, Root: root}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			cfg.GPUs = append(cfg.GPUs, g.UUID)
		}
	}
	// The GPUs come from discovery, the root from the user (its length
	// bounds the daemons' socket paths).
	if err := (mps.Config{Root: "/", GPUs: cfg.GPUs}).WithDefaults().Validate(); err != nil {
		return mps.Config{}, fmt.Errorf("--sharing %s: this host's GPUs: %w", arbiter.ModeMPS, err)
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		return mps.Config{}, usageError("--mps-root: %v", err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return mps.Config{}, fmt.Errorf("--state-dir: %w", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return mps.Config{}, fmt.Errorf("--mps-root: %w", err)
	}
	return cfg, nil
}
