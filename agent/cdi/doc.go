// Package cdi writes the node agent's Container Device Interface spec: one
// JSON file (kind tessera.io/gpu) naming every unit the agent hands out, a
// whole GPU or a MIG instance, by its UUID, with the device nodes a
// container needs for it (/dev/nvidiaN; for a MIG instance also the
// /dev/nvidia-caps nodes of its GPU and compute instance). With it the
// agent answers kubelet's Allocate with tessera.io/gpu=<UUID> CDI names, so
// the runtime injects exactly the assigned devices, MIG instances included.
//
// Driver libraries and hooks are not discovered here: the spec copies the
// top-level container edits of a base spec (the one nvidia-ctk cdi generate
// writes) when one is given.
//
// It must not decide which container gets which device (agent/handoff
// does), and it writes only its own file in the spec folder.
package cdi
