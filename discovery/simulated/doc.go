// Package simulated builds GPU inventories without hardware: from a spec
// string such as "8xH200" or "4xA100-80GB+2xL4", or from a YAML file that
// describes several nodes with per-GPU overrides and topology. Every feature
// of Tessera can run and be tested on it.
//
// Load (TESSERA_SIM_LOAD) is a job's declared use of simulated GPUs, from
// which the host daemon's and the node agent's simulated meters derive
// figures labelled simulated; Window is the windowing both share.
//
// It only fabricates inventory and load; it must not schedule or enforce
// anything.
package simulated
