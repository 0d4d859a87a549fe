// Command etcd is the etcd server built from go.etcd.io/etcd/server/v3 for
// Tessera's integration tests. It is a separate module so the main module
// stays light; the test harness builds it and caches the binary under the
// user cache directory, keyed by the etcd version in this module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
