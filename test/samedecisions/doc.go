// Package samedecisions holds one test: a timed trace replayed by the
// simulator (tracesim's dynamic replay) and through the real control
// plane (etcd, kube-apiserver, KWOK nodes) by the Kubernetes scheduler
// yields the same placements and the same victims, cycle by cycle, since
// both front doors run the same scheduling core (package dispatch). It
// holds no product code and must not be imported.
package samedecisions
