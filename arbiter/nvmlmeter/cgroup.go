package nvmlmeter

import (
	"strings"
)

// Container identifies a Kubernetes container from a process's cgroup.
type Container struct {
	// PodUID is the pod's UID with dashes (the systemd driver's
	// underscores are turned back into dashes).
	PodUID string
	// ID is the runtime's container ID (64 hex digits for containerd,
	// CRI-O and Docker).
	ID string
	// Runtime names the runtime when the path says so: "containerd",
	// "cri-o" or "docker"; "" for cgroupfs paths, which do not.
	Runtime string
}

// ParseCgroup reads the content of /proc/<pid>/cgroup and returns the
// Kubernetes container the process runs in. ok is false for a process
// outside any pod container (a host process, a pod's sandbox or a CRI-O
// conmon). The cgroup v2 line ("0::") is preferred; cgroup v1 lines are
// read in order otherwise.
//
// Path shapes, for a pod UID U (U' with underscores) and a container ID C:
//
//	cgroupfs:  /kubepods[/burstable|/besteffort]/podU/C
//	systemd:   /kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-podU'.slice/<rt>-C.scope
//	           where <rt> is cri-containerd, crio or docker
//	containerd with the systemd driver on some hosts:
//	           /system.slice/containerd.service/kubepods-<qos>-podU'.slice:cri-containerd:C
//
// Anything above the kubepods part (a kind node's own cgroup, a nested
// runtime) and anything below the container (cgroups the container made
// itself) is ignored.
func ParseCgroup(data string) (Container, bool) {
	var v1 []string
	for _, line := range strings.Split(data, "\n") {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			if c, ok := parsePath(parts[2]); ok {
				return c, true
			}
			continue
		}
		v1 = append(v1, parts[2])
	}
	for _, p := range v1 {
		if c, ok := parsePath(p); ok {
			return c, true
		}
	}
	return Container{}, false
}

// parsePath finds the pod segment of a cgroup path and the container
// segment after it.
func parsePath(path string) (Container, bool) {
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		uid, rest, ok := podSegment(seg)
		if !ok {
			continue
		}
		if rest != "" { // "...podU'.slice:cri-containerd:C"
			return containerSegment(uid, rest)
		}
		if i+1 >= len(segs) {
			return Container{}, false // the pod's own cgroup
		}
		return containerSegment(uid, segs[i+1])
	}
	return Container{}, false
}

// podSegment recognises "podU" (cgroupfs) and "[<prefix>-]kubepods[-qos]-podU'.slice"
// (systemd; kind nodes prefix "kubelet-"), returning the UID with dashes and what follows ".slice:" in
// the colon-separated containerd form.
func podSegment(seg string) (uid, rest string, ok bool) {
	switch {
	case strings.HasPrefix(seg, "pod"):
		uid = seg[len("pod"):]
	case strings.Contains(seg, "kubepods") && strings.Contains(seg, "-pod"):
		name, after, colon := strings.Cut(seg, ".slice")
		if !strings.HasSuffix(seg, ".slice") && !strings.HasPrefix(after, ":") {
			return "", "", false
		}
		if colon && strings.HasPrefix(after, ":") {
			rest = after[1:]
		}
		i := strings.LastIndex(name, "-pod")
		if i < 0 {
			return "", "", false
		}
		uid = strings.ReplaceAll(name[i+len("-pod"):], "_", "-")
	default:
		return "", "", false
	}
	if !validUID(uid) {
		return "", "", false
	}
	return uid, rest, true
}

// validUID accepts pod UIDs: a UUID (36 characters) or a static pod's
// hash (32 hex digits).
func validUID(s string) bool {
	if len(s) != 32 && len(s) != 36 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' || r == '-') {
			return false
		}
	}
	return true
}

// scopeRuntime splits a systemd scope name (without ".scope") into the
// runtime its prefix names and the container ID.
func scopeRuntime(scope string) (runtime, id string) {
	for _, r := range [...]struct{ prefix, name string }{
		{"cri-containerd-", "containerd"},
		{"crio-", "cri-o"},
		{"docker-", "docker"},
	} {
		if rest, ok := strings.CutPrefix(scope, r.prefix); ok {
			return r.name, rest
		}
	}
	return "", scope
}

// containerSegment parses the container's own segment: "C" (cgroupfs),
// "<rt>-C.scope" (systemd) or "cri-containerd:C" (colon form).
func containerSegment(uid, seg string) (Container, bool) {
	c := Container{PodUID: uid}
	if rt, id, ok := strings.Cut(seg, ":"); ok {
		if rt != "cri-containerd" {
			return Container{}, false
		}
		c.ID, c.Runtime = id, "containerd"
	} else {
		id := strings.TrimSuffix(seg, ".scope")
		if strings.HasPrefix(id, "crio-conmon-") {
			return Container{}, false // CRI-O's monitor, not the container
		}
		c.Runtime, c.ID = scopeRuntime(id)
	}
	if !validContainerID(c.ID) {
		return Container{}, false
	}
	return c, true
}

// validContainerID accepts 12 to 64 lower-case hex digits.
func validContainerID(s string) bool {
	if len(s) < 12 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
