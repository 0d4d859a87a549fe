// Package migrate translates the queue and gang objects of other GPU
// schedulers into Tessera's: KAI-Scheduler's Queue (scheduling.run.ai/v2)
// and Volcano's Queue and PodGroup (scheduling.volcano.sh/v1beta1) become
// Tessera Queue and PodGroup objects (tessera.io/v1alpha1, see kube/queues
// and kube/podgroups), with a report of every field that could not be
// carried over exactly.
//
// It is pure: objects in, objects and a report out. It must not talk to
// the API server, read files or print; `tessera migrate` (cmd/tessera/cli)
// does that.
package migrate
