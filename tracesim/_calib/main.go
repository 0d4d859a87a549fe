package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/tessera-gpu/tessera/tracesim"
)

func main() {
	traces := flag.String("traces", "default", "")
	pols := flag.String("policies", "fgd", "")
	seeds := flag.Int("seeds", 1, "")
	par := flag.Int("p", 1, "")
	flag.Parse()
	dir := "/work/shared/traces/openb/"
	nodes, err := tracesim.LoadNodes(dir + "openb_node_list_gpu_node.csv")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for _, tr := range strings.Split(*traces, ",") {
		pods, err := tracesim.LoadPods(dir + "openb_pod_list_" + tr + ".csv")
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		for _, pol := range strings.Split(*pols, ",") {
			var mu sync.Mutex
			var a100, a130, end, fail float64
			var el float64
			sem := make(chan bool, *par)
			var wg sync.WaitGroup
			for s := 0; s < *seeds; s++ {
				wg.Add(1)
				sem <- true
				go func(seed uint64) {
					defer wg.Done()
					defer func() { <-sem }()
					r, err := tracesim.Replay(context.Background(), tracesim.Config{Trace: tr, Nodes: nodes, Pods: pods, Policy: pol, Seed: seed, Tune: 1.3})
					if err != nil {
						fmt.Println(err)
						os.Exit(1)
					}
					if *seeds == 1 {
						fmt.Println(r.At(50), r.At(80), r.At(90), r.At(95), r.FailedPods, r.Pods)
					}
					mu.Lock()
					a100 += r.At(100)
					a130 += r.At(130)
					end += r.AllocatedPctEnd
					fail += r.FailedGPUPct()
					el += r.Elapsed.Seconds()
					mu.Unlock()
				}(uint64(42 + s))
			}
			wg.Wait()
			n := float64(*seeds)
			fmt.Printf("%-12s %-14s at100 %.2f at130 %.2f end %.2f failgpu %.2f  (%.1fs/run)\n", tr, pol, a100/n, a130/n, end/n, fail/n, el/n)
		}
	}
}
