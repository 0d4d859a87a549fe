// Command probe is the workload of the real-node tests: it prints what the
// node agent handed its container (the GPU and share variables, and
// whether the preloaded interception library exists inside the
// container) and, when PROBE_READ names a file (one on a mounted volume),
// its first line as probe.read; one "key=value" line each, then waits for
// SIGTERM.
//
// It is built static (CGO_ENABLED=0): the dynamic loader never runs for
// it, so LD_PRELOAD names a file it only checks, never loads.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

func main() {
	var lines []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "CUDA_VISIBLE_DEVICES" || k == "NVIDIA_VISIBLE_DEVICES" || k == "LD_PRELOAD" || strings.HasPrefix(k, "TESSERA_") || strings.HasPrefix(k, "CUDA_MPS_") {
			lines = append(lines, kv)
		}
	}
	if lib := os.Getenv("LD_PRELOAD"); lib != "" {
		st, err := os.Stat(lib)
		switch {
		case err != nil:
			lines = append(lines, "probe.preload=missing: "+err.Error())
		case !st.Mode().IsRegular():
			lines = append(lines, "probe.preload=not a regular file: "+st.Mode().String())
		default:
			lines = append(lines, fmt.Sprintf("probe.preload=exists %d bytes", st.Size()))
		}
	}
	if path := os.Getenv("PROBE_READ"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			lines = append(lines, "probe.read=unreadable: "+err.Error())
		} else {
			first, _, _ := strings.Cut(string(b), "\n")
			lines = append(lines, "probe.read="+first)
		}
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
	fmt.Println("probe.ready=1")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
