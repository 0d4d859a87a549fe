package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/tracesim"
)

func main() {
	dir := "/work/shared/traces/openb/"
	nodes, _ := tracesim.LoadNodes(dir + "openb_node_list_gpu_node.csv")
	pods, _ := tracesim.LoadPods(dir + "openb_pod_list_" + os.Args[2] + ".csv")
	typ := placement.TypicalShapes(pods, 0.95)
	arr := tracesim.Arrivals(pods, nodes.TotalGPUMilli(), 1.3, 42)
	c := nodes.Clone()
	pol, _ := placement.New(os.Args[1], placement.Options{Seed: 42, Typical: typ})
	var arrived int64
	failLate := map[string]int64{}
	for i := range arr {
		p := &arr[i]
		arrived += p.TotalGPUMilli()
		d, err := pol.Place(c, p)
		if err != nil {
			if arrived <= c.TotalGPUMilli() {
				failLate[fmt.Sprintf("n%d milli%d", p.GPUCount(), p.MilliPerGPU())] += p.TotalGPUMilli()
			}
			continue
		}
		c.Apply(p, d)
	}
	fmt.Println("alloc", 100*float64(c.AllocatedGPUMilli())/float64(c.TotalGPUMilli()))
	cls := map[string]int64{}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		f := n.FreeGPUMilli()
		if f == 0 {
			continue
		}
		k := ""
		switch {
		case n.FreeCPUMilli < 4000:
			k = "cpu<4"
		case n.FreeMemoryMiB < 16384:
			k = "mem<16G"
		case n.FullyFreeGPUs() > 0:
			k = fmt.Sprintf("wholefree(%d of %d)", n.FullyFreeGPUs(), len(n.GPUs))
		default:
			k = "partial"
		}
		cls[k] += f
	}
	fmt.Println(cls)
	type kv struct {
		k string
		v int64
	}
	var l []kv
	for k, v := range failLate {
		l = append(l, kv{k, v})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v })
	fmt.Println("failed GPU milli before 100%:", l[:min(10, len(l))])
	for _, t := range typ[:min(12, len(typ))] {
		fmt.Printf("  %+v\n", t.Shape)
	}
	fmt.Println(len(typ))
}
