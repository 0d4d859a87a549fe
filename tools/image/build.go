package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// result describes a written image.
type result struct {
	imageID, manifest string // config and manifest digests
	files, libs       int
	size              int64 // tarball bytes
}

// entry is one tar entry of a layer.
type entry struct {
	name string // image path without the leading slash
	dir  bool
	mode int64
	data []byte
}

const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// build makes the image of s and writes its tarball (and reference file).
func build(s spec) (result, error) {
	ref, err := name.NewTag(s.ref, name.StrictValidation)
	if err != nil {
		return result{}, fmt.Errorf("-ref: must be REGISTRY/REPOSITORY:TAG, got %q: %w", s.ref, err)
	}
	var res result
	var base []entry
	var baseWhat []string
	if s.basics {
		base = append(base,
			entry{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
			entry{name: "etc/group", mode: 0o644, data: []byte(group)},
			entry{name: "home/nonroot", dir: true, mode: 0o755},
			entry{name: "tmp", dir: true, mode: 0o1777},
		)
		baseWhat = append(baseWhat, "/etc/passwd, /etc/group, /home/nonroot, /tmp")
	}
	var files []entry
	for _, f := range s.files {
		e, err := readFile(f.dest, f.src)
		if err != nil {
			return result{}, fmt.Errorf("-add %s=%s: %w", f.dest, f.src, err)
		}
		files = append(files, e)
	}
	res.files = len(files)
	for _, dest := range s.libsOf {
		src := ""
		for _, f := range s.files {
			if f.dest == dest {
				src = f.src
			}
		}
		libs, err := sharedLibs(src)
		if err != nil {
			return result{}, fmt.Errorf("-libs-of %s: %w", dest, err)
		}
		for _, l := range libs {
			e, err := readFile(l, l)
			if err != nil {
				return result{}, fmt.Errorf("-libs-of %s: %w", dest, err)
			}
			if !hasEntry(base, e.name) {
				base = append(base, e)
				res.libs++
			}
		}
		if len(libs) > 0 {
			baseWhat = append(baseWhat, "the shared libraries of "+dest+" ("+strings.Join(libs, ", ")+")")
		}
	}
	img := empty.Image
	if len(base) > 0 {
		if img, err = appendLayer(img, base, s.epoch, "tools/image: "+strings.Join(baseWhat, "; ")); err != nil {
			return result{}, err
		}
	}
	if img, err = appendLayer(img, files, s.epoch, "tools/image: "+strings.Join(destsOf(s.files), ", ")); err != nil {
		return result{}, err
	}
	if img, err = configure(img, s); err != nil {
		return result{}, err
	}
	id, err := img.ConfigName()
	if err != nil {
		return result{}, fmt.Errorf("image config digest: %w", err)
	}
	m, err := img.Digest()
	if err != nil {
		return result{}, fmt.Errorf("image manifest digest: %w", err)
	}
	res.imageID, res.manifest = id.String(), m.String()
	if res.size, err = writeTarball(s.out, ref, img); err != nil {
		return result{}, err
	}
	if s.refFile != "" {
		if err := writeAtomic(s.refFile, []byte(s.ref+"\n")); err != nil {
			return result{}, fmt.Errorf("-ref-file: %w", err)
		}
	}
	return res, nil
}

// configure sets the image config: platform, entrypoint, user,
// environment, labels and creation time; no build time goes in.
func configure(img v1.Image, s spec) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", s.arch
	cf.Created = v1.Time{Time: s.epoch}
	cf.Config = v1.Config{
		Entrypoint: s.entrypoint,
		Cmd:        s.cmd,
		User:       s.user,
		Env:        s.env,
		Labels:     s.labels,
		WorkingDir: "/",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return img, nil
}

// readFile reads a local file for image path dest; the mode is 0755 when
// the file is executable by its owner, else 0644, whatever the umask.
func readFile(dest, src string) (entry, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return entry{}, err
	}
	if !fi.Mode().IsRegular() {
		return entry{}, fmt.Errorf("%s is not a regular file", src)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return entry{}, err
	}
	mode := int64(0o644)
	if fi.Mode().Perm()&0o100 != 0 {
		mode = 0o755
	}
	return entry{name: strings.TrimPrefix(dest, "/"), mode: mode, data: data}, nil
}

func hasEntry(es []entry, name string) bool {
	for _, e := range es {
		if e.name == name {
			return true
		}
	}
	return false
}

// appendLayer adds a layer holding entries (and their parent folders) to img.
func appendLayer(img v1.Image, entries []entry, mtime time.Time, createdBy string) (v1.Image, error) {
	data, err := layerTar(entries, mtime)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: mtime}, CreatedBy: createdBy},
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return img, nil
}

// layerTar is the uncompressed tar of entries: every parent folder is
// added (0755), entries are sorted by path, owned by 0:0 with no user or
// group names, and all carry mtime, so equal entries give equal bytes.
func layerTar(entries []entry, mtime time.Time) ([]byte, error) {
	all := map[string]entry{}
	for _, e := range entries {
		if _, dup := all[e.name]; dup {
			return nil, fmt.Errorf("layer: /%s given twice", e.name)
		}
		all[e.name] = e
	}
	for _, e := range entries {
		for d := path.Dir(e.name); d != "." && d != "/"; d = path.Dir(d) {
			if p, ok := all[d]; ok {
				if !p.dir {
					return nil, fmt.Errorf("layer: /%s is a file and the folder of /%s", d, e.name)
				}
				continue
			}
			all[d] = entry{name: d, dir: true, mode: 0o755}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := all[n]
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: mtime, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer: /%s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer: /%s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

// writeTarball writes img as a docker-archive tarball (manifest.json,
// config and gzip layers: what both docker load and ctr images import
// read), through a temporary file renamed into place.
func writeTarball(out string, ref name.Tag, img v1.Image) (int64, error) {
	var buf bytes.Buffer
	if err := tarball.Write(ref, img, &buf); err != nil {
		return 0, fmt.Errorf("-out %s: %w", out, err)
	}
	if err := writeAtomic(out, buf.Bytes()); err != nil {
		return 0, fmt.Errorf("-out: %w", err)
	}
	return int64(buf.Len()), nil
}

// writeAtomic writes data to file through a temporary file in its folder.
func writeAtomic(file string, data []byte) error {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing there
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// cleanPath is path.Clean, for -add's image paths.
func cleanPath(p string) string { return path.Clean(p) }
