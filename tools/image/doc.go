// Command image packs files built on this machine into a container image
// tarball that `docker load` and `ctr images import` (containerd 1.6 and
// later) accept, without Docker, a registry or a base image: `make image`
// packs tessera and the CUDA interception library, `make pause-image` the
// real test node's pause program (tools/image/pause).
//
// The image is built from nothing (empty.Image of go-containerregistry) and
// is reproducible: every file time is the -epoch (SOURCE_DATE_EPOCH), tar
// entries are sorted and owned by 0:0, modes are 0755 or 0644 from the
// source's executable bit, and the config holds no build time, so the same
// inputs give the same image digest and the same tarball bytes.
//
// A dynamically linked program's shared libraries (-libs-of) are copied from
// this machine at the paths ldd reports; see the Makefile's image target for
// why tessera is shipped that way.
//
// It owns the packing only: it must not build the files it packs, push
// anywhere or pull a base image.
package main
