// Package deviceplugin speaks kubelet's device plugin API (v1beta1) for one
// extended resource: it serves the plugin on a unix socket in kubelet's
// device-plugins folder, registers with kubelet, streams the device list
// and its health to ListAndWatch, and passes GetPreferredAllocation,
// Allocate and PreStartContainer to a Handler. When kubelet restarts it
// deletes the plugin's socket and re-creates its own; the server notices,
// serves again and re-registers.
//
// It owns the protocol only: which container an Allocate is for and what it
// gets is the Handler's business (the agent package). It must not read the
// API server or decide shares.
package deviceplugin
