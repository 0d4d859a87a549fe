// Command etcd is the etcd server built from go.etcd.io/etcd/server/v3 for
// Tessera's integration tests. It lives in tools/cluster with the other
// programs the tests run (see that module's doc.go).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
