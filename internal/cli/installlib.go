package cli

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// libFile is the interception library's file name, in each versioned
// folder and as the stable symlink.
const libFile = "libtessera-intercept.so"

// imageLibPath is where the Tessera image holds the library (make image).
const imageLibPath = "/usr/local/lib/tessera/" + libFile

// maxKeep bounds --keep.
const maxKeep = 100

func newInstallLibCommand(a *app) *cobra.Command {
	var o libInstall
	cmd := &cobra.Command{
		Use:   "install-lib --to DIR",
		Short: "Install the CUDA interception library into a node folder (the agent's init container runs it)",
		Long: `Install the CUDA interception library on a node, for the agent to bind-mount
into containers (its --intercept-library names DIR/` + libFile + `).

The library is copied to DIR/<version>-<first 12 hex digits of its sha256>/` + libFile + `
(a temporary file, synced, renamed into place), then the stable symlink
DIR/` + libFile + ` is switched to it atomically (a new symlink renamed over
the old one), so a reader never finds the path missing. Running it again with
the same library changes nothing. The newest --keep versioned folders are
kept, never removing the one the symlink names; containers that run an
older version keep their bind-mounted file even after its folder goes.

The Tessera image has no shell: this is what its init container runs.`,
		Example: `  tessera install-lib --from /usr/local/lib/tessera/` + libFile + ` --to /var/lib/tessera/lib`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, _ := debug.ReadBuildInfo()
			o.version = resolveBuildInfo(version, commit, buildDate, bi).Version
			if err := o.validate(); err != nil {
				return asUsage(err)
			}
			msg, err := o.install()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, msg)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.from, "from", imageLibPath, "the library to install")
	f.StringVar(&o.to, "to", "", "node folder to install into, e.g. /var/lib/tessera/lib (required)")
	f.IntVar(&o.keep, "keep", 3, "versioned folders to keep, the current one included")
	setRange(cmd, "keep", fmt.Sprintf("in [1, %d]", maxKeep))
	return cmd
}

// libInstall is one install-lib run.
type libInstall struct {
	from, to string
	keep     int
	version  string // this tessera's version: the first part of the folder name
}

func (o libInstall) validate() error {
	switch {
	case o.from == "":
		return fmt.Errorf("--from: must name the library file, e.g. %s", imageLibPath)
	case o.to == "":
		return errors.New("--to: must name the node folder to install into, e.g. /var/lib/tessera/lib")
	case o.keep < 1 || o.keep > maxKeep:
		return fmt.Errorf("--keep: must be in [1, %d], got %d", maxKeep, o.keep)
	}
	return nil
}

// elfMagic starts every ELF file, shared libraries included.
var elfMagic = []byte("\x7fELF")

// versionedDir matches the folders install-lib makes: <version>-<12 hex>.
var versionedDir = regexp.MustCompile(`^[A-Za-z0-9._+-]+-[0-9a-f]{12}$`)

// install copies the library, switches the symlink and prunes; it returns
// the line to print.
func (o libInstall) install() (string, error) {
	data, err := readLibrary(o.from)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	name := folderVersion(o.version) + "-" + hex.EncodeToString(sum[:])[:12]
	if err := os.MkdirAll(o.to, 0o755); err != nil {
		return "", fmt.Errorf("--to %q: %w", o.to, err)
	}
	if fi, err := os.Stat(o.to); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("--to %q: not a folder", o.to)
	}
	dir := filepath.Join(o.to, name)
	wrote, err := placeLibrary(dir, data, sum)
	if err != nil {
		return "", err
	}
	link := filepath.Join(o.to, libFile)
	target := filepath.Join(name, libFile)
	previous, _ := os.Readlink(link)
	switched := previous != target
	if switched {
		now := time.Now()
		// The folder becomes the newest, also when it was there before
		// (a downgrade to a kept version), so pruning keeps it.
		if err := os.Chtimes(dir, now, now); err != nil {
			return "", fmt.Errorf("--to %q: %w", o.to, err)
		}
		if err := swapSymlink(link, target); err != nil {
			return "", fmt.Errorf("--to %q: %w", o.to, err)
		}
	}
	removed, err := prune(o.to, name, o.keep)
	if err != nil {
		return "", fmt.Errorf("--to %q: %w", o.to, err)
	}
	var msg string
	switch {
	case wrote && switched:
		msg = fmt.Sprintf("installed %s %s: %s -> %s", libFile, name, link, target)
	case switched:
		msg = fmt.Sprintf("switched %s to the installed %s: %s -> %s", libFile, name, link, target)
	case wrote:
		msg = fmt.Sprintf("repaired %s %s (its file was missing or damaged): %s -> %s", libFile, name, link, target)
	default:
		msg = fmt.Sprintf("%s %s already installed, nothing changed: %s -> %s", libFile, name, link, target)
	}
	if switched && previous != "" {
		msg += fmt.Sprintf(" (was %s)", previous)
	}
	if len(removed) > 0 {
		msg += fmt.Sprintf("; removed older %s", strings.Join(removed, ", "))
	}
	return msg, nil
}

// readLibrary reads --from, which must be a non-empty ELF file.
func readLibrary(from string) ([]byte, error) {
	fi, err := os.Stat(from)
	if err != nil {
		return nil, asUsage(fmt.Errorf("--from %q: %w", from, err))
	}
	if !fi.Mode().IsRegular() {
		return nil, usageError("--from %q: must be a file, not a %s", from, kindOf(fi.Mode()))
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return nil, fmt.Errorf("--from %q: %w", from, err)
	}
	if !bytes.HasPrefix(data, elfMagic) {
		return nil, usageError("--from %q: not an ELF shared library (it does not start with \\x7fELF)", from)
	}
	return data, nil
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "folder"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// folderVersion makes a version usable in a folder name: characters other
// than letters, digits, '.', '_', '+' and '-' become '_'.
func folderVersion(v string) string {
	if v == "" {
		return "devel"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '+', r == '-':
			return r
		}
		return '_'
	}, v)
}

// placeLibrary makes dir/libFile hold data, unless it already does; it
// reports whether it wrote. The file is written to a temporary name in dir,
// synced and renamed, so the path holds either nothing or all of it.
func placeLibrary(dir string, data []byte, sum [sha256.Size]byte) (bool, error) {
	file := filepath.Join(dir, libFile)
	if old, err := os.ReadFile(file); err == nil && sha256.Sum256(old) == sum {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, "."+libFile+".tmp-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing there
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return false, err
	}
	return true, syncDir(dir)
}

// swapSymlink points link at target atomically: a symlink made under a
// temporary name is renamed over link, so link always names a file.
func swapSymlink(link, target string) error {
	dir := filepath.Dir(link)
	var tmp string
	for range 10 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		tmp = filepath.Join(dir, "."+libFile+".link-"+hex.EncodeToString(b[:]))
		err := os.Symlink(target, tmp)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		tmp = ""
	}
	if tmp == "" {
		return fmt.Errorf("cannot find a free temporary name for the symlink in %s", dir)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// prune removes versioned folders of dir beyond the keep newest (by
// modification time), never current; other entries are left alone. It
// returns the names removed.
func prune(dir, current string, keep int) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type folder struct {
		name string
		mod  time.Time
	}
	var folders []folder
	for _, e := range entries {
		if !e.IsDir() || !versionedDir.MatchString(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			return nil, err
		}
		folders = append(folders, folder{e.Name(), fi.ModTime()})
	}
	sort.Slice(folders, func(i, j int) bool {
		if !folders[i].mod.Equal(folders[j].mod) {
			return folders[i].mod.After(folders[j].mod)
		}
		return folders[i].name > folders[j].name
	})
	var removed []string
	kept := 0
	for _, f := range folders {
		if f.name == current || kept < keep-1 {
			if f.name != current {
				kept++
			}
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, f.name)); err != nil {
			return removed, err
		}
		removed = append(removed, f.name)
	}
	return removed, nil
}
