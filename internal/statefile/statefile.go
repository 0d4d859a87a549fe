package statefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/tessera-gpu/tessera/internal/atomicfile"
)

// Format is one kind of state file.
type Format struct {
	// Name says what the file is, in errors: "checkpoint", "MIG journal".
	Name string
	// Version is the version written, and the only one understood, in the
	// file's top-level "version" field.
	Version int
}

// header is the part of every state file read before the rest.
type header struct {
	Version int `json:"version"`
}

// Load reads the file at path into v, a pointer to the file's Go type,
// whose "version" field must say f.Version. A missing file is not an
// error: Load returns false and leaves v alone. A file it cannot read, a
// damaged one, one of another version or one holding a field v's type does
// not have is an error naming the file; v may then be partly filled.
func (f Format) Load(path string, v any) (bool, error) {
	data, err := readNoFollow(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", f.Name, err)
	}
	// The version first: a file of another version is refused as such,
	// not for a field its version added. Unmarshal also refuses anything
	// after the value.
	var h header
	if err := json.Unmarshal(data, &h); err != nil {
		return false, fmt.Errorf("%s %s: %w", f.Name, path, err)
	}
	if h.Version != f.Version {
		return false, fmt.Errorf("%s %s: version: must be %d, got %d", f.Name, path, f.Version, h.Version)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false, fmt.Errorf("%s %s: %w", f.Name, path, err)
	}
	return true, nil
}

// readNoFollow reads the file at path, refusing a symbolic link (a state
// file is written by rename, so a link there was put by someone else).
func readNoFollow(path string) ([]byte, error) {
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: a state file is never read through a link; remove it", path)
	}
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return io.ReadAll(file)
}

// Save replaces the file at path with v encoded as JSON, atomically and
// durably (internal/atomicfile, mode 0600). v's "version" field must say
// f.Version. The folder must exist. On an error the old file is as it was.
func (f Format) Save(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", f.Name, err)
	}
	var h header
	if err := json.Unmarshal(data, &h); err != nil {
		return fmt.Errorf("encode %s: must be a JSON object with a version: %w", f.Name, err)
	}
	if h.Version != f.Version {
		return fmt.Errorf("encode %s: version: must be %d, got %d", f.Name, f.Version, h.Version)
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	return nil
}
