// Command pause is the sandbox ("pause") container of the real test node:
// PID 1 of each pod's sandbox. It waits for SIGTERM or SIGINT and exits 0,
// and reaps every child that exits (SIGCHLD), so that processes re-parented
// to it in a shared PID namespace never linger as zombies.
//
// It is built with CGO_ENABLED=0 into a static binary and packed by the
// image tool (tools/image) as registry.k8s.io/pause:3.10 (`make
// pause-image`), so the real node needs no registry. It must stay this
// small: no flags; it prints one line once it is waiting (or on a bad
// invocation).
package main
