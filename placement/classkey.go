package placement

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/tessera-gpu/tessera/request"
)

// Class keys: two nodes with equal keys are in the same state as far as
// feasibility and every class-based policy's score can tell, so they
// score the same (names and positions in the cluster aside). A key holds
// the node's CPU and memory (capacity and free), whether it has a pod slot
// free (no policy scores slots and a part takes at most one, so nodes
// with 3 and 40 free stay one class), its GPU count and:
//
//   - for a plain node (every GPU of one model and memory size, no
//     topology, no MIG, free compute within [0, Whole]): the model, the
//     GPU memory size and the multiset of (free compute, free memory) of
//     its GPUs. Which GPU a pod takes there depends on positions, but for
//     the pods the class path serves (classSafe) the score does not: a
//     sharing pod's score reads the free compute of the GPUs it could
//     take (a set of values), a whole-GPU pod takes GPUs with all compute
//     free;
//   - for a node with NVLink or NUMA topology, mixed models or memory
//     sizes: every GPU's state in position order and the NVLink matrix,
//     so nodes in one class are the same node apart from the name;
//   - for a node with a GPU in MIG mode, or a closed node (Node.Closed):
//     its position in the cluster (a class of its own; MIG layouts are
//     many and such nodes few, and a closed node fits nothing).
//
// With keyShapes (GpuClustering) the key also holds the set of GPU
// shapes booked on the node.

// Key kinds, the key's first byte.
const (
	keyPlain   byte = 1
	keyOrdered byte = 2
	keyUnique  byte = 3
)

// plainMaxGPUs is the most GPUs a plain key sorts; larger nodes take the
// ordered key.
const plainMaxGPUs = 16

// gpuPair is one GPU's free compute and memory in a plain key.
type gpuPair struct{ milli, mem int64 }

// appendClassKey appends the class key of node n (at position ni) to dst.
func appendClassKey(dst []byte, n *Node, ni int, keyShapes bool) []byte {
	if n.Closed != "" { // fits nothing; few (cordoned, not ready)
		dst = append(dst, keyUnique)
		return binary.AppendUvarint(dst, uint64(ni))
	}
	for i := range n.GPUs {
		if n.GPUs[i].MIG != nil {
			dst = append(dst, keyUnique)
			return binary.AppendUvarint(dst, uint64(ni))
		}
	}
	plain := isPlain(n)
	kind := keyOrdered
	if plain {
		kind = keyPlain
	}
	dst = append(dst, kind)
	dst = binary.AppendVarint(dst, n.CPUMilli)
	dst = binary.AppendVarint(dst, n.MemoryMiB)
	dst = binary.AppendVarint(dst, n.FreeCPUMilli)
	dst = binary.AppendVarint(dst, n.FreeMemoryMiB)
	if n.Pods == 0 || n.FreePods > 0 {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(n.GPUs)))
	if plain {
		dst = appendPlainGPUs(dst, n)
	} else {
		dst = appendOrderedGPUs(dst, n)
	}
	if keyShapes {
		dst = appendShapes(dst, n.Shapes)
	}
	return dst
}

// isPlain reports whether n's GPUs are interchangeable but for their free
// compute and memory (see the plain key above).
func isPlain(n *Node) bool {
	if n.NVLinks != nil || len(n.GPUs) > plainMaxGPUs {
		return false
	}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if g.NUMANode >= 0 || g.FreeMilli < 0 || g.FreeMilli > request.Whole ||
			!sameString(g.Model, n.GPUs[0].Model) || g.MemoryMiB != n.GPUs[0].MemoryMiB {
			return false
		}
	}
	return true
}

// appendPlainGPUs appends the model, memory size and the sorted (free
// compute, free memory) pairs of a plain node.
func appendPlainGPUs(dst []byte, n *Node) []byte {
	if len(n.GPUs) == 0 {
		return dst
	}
	dst = appendString(dst, n.GPUs[0].Model)
	dst = binary.AppendVarint(dst, n.GPUs[0].MemoryMiB)
	var buf [plainMaxGPUs]gpuPair
	s := buf[:len(n.GPUs)]
	for i := range n.GPUs {
		s[i] = gpuPair{n.GPUs[i].FreeMilli, n.GPUs[i].FreeMemoryMiB}
	}
	for i := 1; i < len(s); i++ { // insertion sort: a handful of GPUs
		for j := i; j > 0 && lessPair(s[j], s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	for _, x := range s {
		dst = binary.AppendVarint(dst, x.milli)
		dst = binary.AppendVarint(dst, x.mem)
	}
	return dst
}

func lessPair(a, b gpuPair) bool {
	return a.milli < b.milli || (a.milli == b.milli && a.mem < b.mem)
}

// appendOrderedGPUs appends every GPU's state in position order and the
// NVLink matrix.
func appendOrderedGPUs(dst []byte, n *Node) []byte {
	for i := range n.GPUs {
		g := &n.GPUs[i]
		dst = appendString(dst, g.Model)
		dst = binary.AppendVarint(dst, g.MemoryMiB)
		dst = binary.AppendVarint(dst, g.FreeMilli)
		dst = binary.AppendVarint(dst, g.FreeMemoryMiB)
		dst = binary.AppendVarint(dst, int64(g.NUMANode))
	}
	if n.NVLinks == nil {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, uint64(len(n.NVLinks)))
	for _, row := range n.NVLinks {
		dst = binary.AppendUvarint(dst, uint64(len(row)))
		for _, v := range row {
			dst = binary.AppendVarint(dst, int64(v))
		}
	}
	return dst
}

// appendShapes appends the set of shapes booked (the map's keys, sorted).
func appendShapes(dst []byte, shapes map[GPUShape]int) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(shapes)))
	if len(shapes) == 0 {
		return dst
	}
	var buf [8]GPUShape
	keys := buf[:0]
	for k := range shapes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b GPUShape) int {
		if c := cmp.Compare(a.Count, b.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Milli, b.Milli)
	})
	for _, k := range keys {
		dst = binary.AppendVarint(dst, int64(k.Count))
		dst = binary.AppendVarint(dst, k.Milli)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// classSafe reports whether a decision for p may be made by class: the
// score of a node for p depends on its class key only. Not for MIG
// requests (placed by their own chooser) nor for a multi-GPU request of
// less than whole GPUs, which takes the lowest GPU positions that fit,
// whose free compute differs between plain nodes of one class.
func classSafe(p *Pod) bool {
	return !p.MIG() && (p.GPUCount() <= 1 || p.MilliPerGPU() >= request.Whole)
}
