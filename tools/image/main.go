package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv("SOURCE_DATE_EPOCH"), os.Stdout, os.Stderr))
}

// run is the command line: it parses args, builds the image and writes the
// tarball; it returns the exit code (2 for bad flags, 1 when building fails).
func run(args []string, sourceDateEpoch string, stdout, stderr io.Writer) int {
	spec, err := parseFlags(args, sourceDateEpoch, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "image:", err)
		return 2
	}
	res, err := build(spec)
	if err != nil {
		fmt.Fprintln(stderr, "image:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s: %s (image ID %s, manifest %s; files: %d, shared libraries: %d; %.1f MB)\n",
		spec.out, spec.ref, res.imageID, res.manifest, res.files, res.libs, float64(res.size)/1e6)
	return 0
}

// spec is what to build, from the flags.
type spec struct {
	ref        string   // image reference, registry/repository:tag
	out        string   // tarball to write
	refFile    string   // optional file that receives ref and a newline
	files      []file   // -add, in flag order
	libsOf     []string // image paths (of files) whose shared libraries are added
	entrypoint []string
	cmd        []string
	user       string
	env        []string
	labels     map[string]string
	epoch      time.Time
	basics     bool   // /etc/passwd, /etc/group and /tmp
	arch       string // GOARCH of the packed programs
}

// file is one -add: a file of this machine and its path in the image.
type file struct {
	dest, src string
}

// createdLabel is the OCI label the tool sets from -epoch.
const createdLabel = "org.opencontainers.image.created"

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func parseFlags(args []string, sourceDateEpoch string, stderr io.Writer) (spec, error) {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: image -ref REGISTRY/REPO:TAG -out FILE.tar -add /PATH/IN/IMAGE=LOCAL/FILE... [flags]

Packs local files into a reproducible image tarball for docker load and ctr images import.`)
		fs.PrintDefaults()
	}
	var (
		s                                     spec
		adds, libsOf, entry, cmd, env, labels listFlag
		epoch                                 string
	)
	fs.StringVar(&s.ref, "ref", "", "image reference with registry and tag, e.g. ghcr.io/tessera-gpu/tessera:v1.2.3 (required)")
	fs.StringVar(&s.out, "out", "", "tarball to write (required)")
	fs.StringVar(&s.refFile, "ref-file", "", "also write the image reference, one line, to this file")
	fs.Var(&adds, "add", "DEST=SRC: put local file SRC at absolute path DEST in the image (repeatable; mode 0755 when SRC is executable, else 0644)")
	fs.Var(&libsOf, "libs-of", "DEST of an -add program whose shared libraries (ldd) are copied into the image at the paths ldd names (repeatable)")
	fs.Var(&entry, "entrypoint", "one word of the entrypoint (repeatable, in order)")
	fs.Var(&cmd, "cmd", "one word of the default arguments (repeatable, in order)")
	fs.StringVar(&s.user, "user", "65532:65532", "user (uid[:gid]) the image runs as")
	fs.Var(&env, "env", "KEY=VALUE in the image's environment (repeatable; default PATH=/usr/local/bin:/usr/bin:/bin)")
	fs.Var(&labels, "label", "KEY=VALUE image label (repeatable); "+createdLabel+" is set from -epoch")
	fs.StringVar(&epoch, "epoch", sourceDateEpoch, "file and creation time, Unix seconds (default $SOURCE_DATE_EPOCH)")
	fs.BoolVar(&s.basics, "basics", false, "add /etc/passwd and /etc/group (root and nonroot 65532) and /tmp (1777)")
	fs.StringVar(&s.arch, "arch", runtime.GOARCH, "architecture of the packed programs (GOARCH)")
	if err := fs.Parse(args); err != nil {
		return spec{}, err
	}
	if fs.NArg() > 0 {
		return spec{}, fmt.Errorf("unexpected argument %q: everything is given by flags", fs.Arg(0))
	}
	if s.ref == "" {
		return spec{}, errors.New("-ref: must be set, e.g. ghcr.io/tessera-gpu/tessera:v1.2.3")
	}
	if s.out == "" {
		return spec{}, errors.New("-out: must be set to the tarball to write")
	}
	if len(adds) == 0 {
		return spec{}, errors.New("-add: give at least one DEST=SRC")
	}
	seen := map[string]bool{}
	for _, a := range adds {
		dest, src, ok := strings.Cut(a, "=")
		if !ok || src == "" || !strings.HasPrefix(dest, "/") || strings.HasSuffix(dest, "/") || cleanPath(dest) != dest {
			return spec{}, fmt.Errorf("-add: must be /ABSOLUTE/PATH/IN/IMAGE=LOCAL/FILE with a clean image path, got %q", a)
		}
		if seen[dest] {
			return spec{}, fmt.Errorf("-add: image path %s given twice", dest)
		}
		seen[dest] = true
		s.files = append(s.files, file{dest: dest, src: src})
	}
	for _, l := range libsOf {
		if !seen[l] {
			return spec{}, fmt.Errorf("-libs-of: %q is not the image path of an -add file (have %s)", l, strings.Join(destsOf(s.files), ", "))
		}
	}
	s.libsOf = libsOf
	if len(entry) == 0 {
		return spec{}, errors.New("-entrypoint: must be set (the program the image runs)")
	}
	s.entrypoint, s.cmd = entry, cmd
	if err := checkUser(s.user); err != nil {
		return spec{}, err
	}
	s.env = env
	if len(env) == 0 {
		s.env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	}
	for _, e := range s.env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return spec{}, fmt.Errorf("-env: must be KEY=VALUE, got %q", e)
		}
	}
	s.labels = map[string]string{}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		switch {
		case !ok || k == "":
			return spec{}, fmt.Errorf("-label: must be KEY=VALUE, got %q", l)
		case k == createdLabel:
			return spec{}, fmt.Errorf("-label: %s is set from -epoch, not given", createdLabel)
		}
		s.labels[k] = v
	}
	if epoch == "" {
		return spec{}, errors.New("-epoch: must be set (or $SOURCE_DATE_EPOCH), in Unix seconds, e.g. the commit time: git log -1 --format=%ct")
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || sec < 0 || sec > 1<<33 {
		return spec{}, fmt.Errorf("-epoch: must be Unix seconds in [0, %d], got %q", int64(1)<<33, epoch)
	}
	s.epoch = time.Unix(sec, 0).UTC()
	s.labels[createdLabel] = s.epoch.Format(time.RFC3339)
	if s.arch == "" {
		return spec{}, errors.New("-arch: must be set (a GOARCH such as amd64 or arm64)")
	}
	return s, nil
}

// checkUser accepts uid or uid:gid in numbers: the image may have no
// /etc/passwd to resolve names.
func checkUser(u string) error {
	parts := strings.Split(u, ":")
	if len(parts) > 2 {
		return fmt.Errorf("-user: must be UID or UID:GID in numbers, got %q", u)
	}
	for _, n := range parts {
		if _, err := strconv.ParseUint(n, 10, 32); err != nil {
			return fmt.Errorf("-user: must be UID or UID:GID in numbers, got %q", u)
		}
	}
	return nil
}

func destsOf(files []file) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.dest
	}
	return out
}
