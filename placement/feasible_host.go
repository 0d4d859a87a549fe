package placement

import "fmt"

// ClosedCordoned is Node.Closed for a node closed only because it is
// cordoned (Kubernetes: spec.unschedulable), which a pod that tolerates
// the cordon may still use (Pod.OpensCordoned).
const ClosedCordoned = "node is unschedulable"

// okOpen: the node takes new work (Node.Closed), or is only cordoned and
// the pod tolerates that.
func okOpen(n *Node, p *Pod) bool {
	return n.Closed == "" || (p.OpensCordoned && n.Closed == ClosedCordoned)
}

func whyOpen(n *Node, _ *Pod) string { return n.Closed }

// okCPU: the node has the pod's CPU free (nodes with untracked CPU pass).
func okCPU(n *Node, p *Pod) bool { return n.CPUMilli == 0 || n.FreeCPUMilli >= p.CPUMilli }

func whyCPU(n *Node, p *Pod) string {
	return fmt.Sprintf("insufficient CPU: %dm free, %dm requested", n.FreeCPUMilli, p.CPUMilli)
}

// okMemory: the node has the pod's memory free (untracked memory passes).
func okMemory(n *Node, p *Pod) bool { return n.MemoryMiB == 0 || n.FreeMemoryMiB >= p.MemoryMiB }

func whyMemory(n *Node, p *Pod) string {
	return fmt.Sprintf("insufficient memory: %d MiB free, %d MiB requested", n.FreeMemoryMiB, p.MemoryMiB)
}

// okPods: the node has a pod slot free for a part that takes one (nodes
// without a pod limit pass).
func okPods(n *Node, p *Pod) bool { return !p.Slot || n.Pods == 0 || n.FreePods > 0 }

// whyPods says it as kube-scheduler's "Too many pods" does, with the limit.
func whyPods(n *Node, _ *Pod) string { return fmt.Sprintf("node pod limit %d reached", n.Pods) }
