package libinstall

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
	"sort"
	"strconv"
	"strings"
	"time"
)

// File is the interception library's file name, in each versioned folder
// and as the stable symlink.
const File = "libtessera-intercept.so"

// MaxKeep bounds Options.Keep.
const MaxKeep = 100

// Options are one installation.
type Options struct {
	// From is the library to install.
	From string
	// To is the node folder it goes into.
	To string
	// Keep is how many versioned folders to keep, the current one
	// included, in [1, MaxKeep].
	Keep int
	// Version is this Tessera's version: the first part of the folder name.
	Version string
}

// Error is a failure tied to one option: Option ("from", "to", "keep"),
// the Value given (none when it is missing or a number), and what went
// wrong: Msg, or Err from the system. Input reports that the option itself
// is wrong (trying again does not help).
type Error struct {
	Option, Value, Msg string
	Input              bool
	Err                error
}

func (e *Error) Error() string {
	s := e.Option
	if e.Value != "" {
		s += " " + strconv.Quote(e.Value)
	}
	s += ": " + e.Msg
	if e.Err != nil {
		if e.Msg != "" {
			s += ": "
		}
		s += e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

func inputError(option, value, format string, args ...any) error {
	return &Error{Option: option, Value: value, Msg: fmt.Sprintf(format, args...), Input: true}
}

// Validate checks the options.
func (o Options) Validate() error {
	switch {
	case o.From == "":
		return inputError("from", "", "must name the library file, e.g. /usr/local/lib/tessera/%s", File)
	case o.To == "":
		return inputError("to", "", "must name the node folder to install into, e.g. /var/lib/tessera/lib")
	case o.Keep < 1 || o.Keep > MaxKeep:
		return inputError("keep", "", "must be in [1, %d], got %d", MaxKeep, o.Keep)
	}
	return nil
}

// elfMagic starts every ELF file, shared libraries included.
var elfMagic = []byte("\x7fELF")

// versionedDir matches the folders install-lib makes: <version>-<12 hex>.
var versionedDir = regexp.MustCompile(`^[A-Za-z0-9._+-]+-[0-9a-f]{12}$`)

// Install copies the library, switches the symlink and prunes; it returns
// one line saying what it did. Bad options or a --from that is no library
// give an *Error naming the option.
func Install(o Options) (string, error) {
	if err := o.Validate(); err != nil {
		return "", err
	}
	data, err := readLibrary(o.From)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	name := folderVersion(o.Version) + "-" + hex.EncodeToString(sum[:])[:12]
	if err := os.MkdirAll(o.To, 0o755); err != nil {
		return "", &Error{Option: "to", Value: o.To, Err: err}
	}
	if fi, err := os.Stat(o.To); err != nil || !fi.IsDir() {
		return "", &Error{Option: "to", Value: o.To, Msg: "not a folder"}
	}
	dir := filepath.Join(o.To, name)
	wrote, err := placeLibrary(dir, data, sum)
	if err != nil {
		return "", err
	}
	link := filepath.Join(o.To, File)
	target := filepath.Join(name, File)
	previous, _ := os.Readlink(link)
	switched := previous != target
	if switched {
		now := time.Now()
		// The folder becomes the newest, also when it was there before
		// (a downgrade to a kept version), so pruning keeps it.
		if err := os.Chtimes(dir, now, now); err != nil {
			return "", &Error{Option: "to", Value: o.To, Err: err}
		}
		if err := swapSymlink(link, target); err != nil {
			return "", &Error{Option: "to", Value: o.To, Err: err}
		}
	}
	removed, err := prune(o.To, name, o.Keep)
	if err != nil {
		return "", &Error{Option: "to", Value: o.To, Err: err}
	}
	var msg string
	switch {
	case wrote && switched:
		msg = fmt.Sprintf("installed %s %s: %s -> %s", File, name, link, target)
	case switched:
		msg = fmt.Sprintf("switched %s to the installed %s: %s -> %s", File, name, link, target)
	case wrote:
		msg = fmt.Sprintf("repaired %s %s (its file was missing or damaged): %s -> %s", File, name, link, target)
	default:
		msg = fmt.Sprintf("%s %s already installed, nothing changed: %s -> %s", File, name, link, target)
	}
	if switched && previous != "" {
		msg += fmt.Sprintf(" (was %s)", previous)
	}
	if len(removed) > 0 {
		msg += fmt.Sprintf("; removed older %s", strings.Join(removed, ", "))
	}
	return msg, nil
}

// readLibrary reads the library to install, which must be a non-empty ELF file.
func readLibrary(from string) ([]byte, error) {
	fi, err := os.Stat(from)
	if err != nil {
		return nil, &Error{Option: "from", Value: from, Input: true, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return nil, inputError("from", from, "must be a file, not a %s", kindOf(fi.Mode()))
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return nil, &Error{Option: "from", Value: from, Err: err}
	}
	if !bytes.HasPrefix(data, elfMagic) {
		return nil, inputError("from", from, "not an ELF shared library (it does not start with \\x7fELF)")
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

// placeLibrary makes dir/File hold data, unless it already does; it
// reports whether it wrote. The file is written to a temporary name in dir,
// synced and renamed, so the path holds either nothing or all of it.
func placeLibrary(dir string, data []byte, sum [sha256.Size]byte) (bool, error) {
	file := filepath.Join(dir, File)
	if old, err := os.ReadFile(file); err == nil && sha256.Sum256(old) == sum {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, "."+File+".tmp-*")
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
		tmp = filepath.Join(dir, "."+File+".link-"+hex.EncodeToString(b[:]))
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
