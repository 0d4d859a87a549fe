// Package kubeletsim is a kubelet stand-in for tests of the device plugin
// over real gRPC on unix sockets. It does what kubelet's device manager
// does, as far as a device plugin can tell:
//
//   - serves the Registration service on kubelet.sock in its device-plugins
//     folder, dials a plugin that registers and follows its ListAndWatch
//     stream;
//   - admits pods one at a time, in the order given (kubelet admits a batch
//     oldest first): the pod becomes active (listed by PodResources) before
//     its devices are allocated; for each container that requests the
//     resource (init containers first) it asks GetPreferredAllocation while
//     holding its device lock, takes the devices, then calls Allocate
//     without the lock and records the devices;
//   - calls PreStartContainer before starting a container when the plugin
//     asks for it;
//   - serves the PodResources List API (active pods, their containers,
//     regular init containers left out, and their devices);
//   - restarts: deletes every socket in the folder (its own and the
//     plugins'), keeps its allocations (kubelet's checkpoint) and serves a
//     fresh kubelet.sock, so plugins must register again; RestartStarting
//     also keeps the PodResources API listing no pod until Synced, as a
//     real kubelet's does before its pod manager has re-added the pods.
//
// A plugin that calls PodResources while kubelet holds its device lock
// deadlocks a real kubelet; the stand-in answers such a call with an error
// instead, so a test fails rather than hangs. It is test-only support: it
// must not be imported by the agent itself.
package kubeletsim
