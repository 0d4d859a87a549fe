package nvmlmeter

import (
	"strings"
	"testing"
)

const (
	uid   = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	uidU  = "0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0" // systemd's spelling
	ctrID = "4a5b6c7d8e9f00112233445566778899aabbccddeeff00112233445566778899"
	// staticUID is a static pod's UID: the hash of its manifest.
	staticUID = "8a8e1f0c3b9d4e6f7a1b2c3d4e5f6a7b"
)

func TestParseCgroup(t *testing.T) {
	cases := []struct {
		name string
		data string
		want Container // zero: not a container
	}{
		{
			name: "v2 systemd containerd burstable",
			data: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + ctrID + ".scope\n",
			want: Container{PodUID: uid, ID: ctrID, Runtime: "containerd"},
		},
		{
			name: "v2 systemd cri-o besteffort",
			data: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidU + ".slice/crio-" + ctrID + ".scope",
			want: Container{PodUID: uid, ID: ctrID, Runtime: "cri-o"},
		},
		{
			name: "v2 systemd guaranteed (no QoS slice)",
			data: "0::/kubepods.slice/kubepods-pod" + uidU + ".slice/cri-containerd-" + ctrID + ".scope",
			want: Container{PodUID: uid, ID: ctrID, Runtime: "containerd"},
		},
		{
			name: "v2 cgroupfs containerd",
			data: "0::/kubepods/burstable/pod" + uid + "/" + ctrID,
			want: Container{PodUID: uid, ID: ctrID},
		},
		{
			name: "v2 seen from the agent's own cgroup namespace",
			data: "0::/../../kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + ctrID + ".scope",
			want: Container{PodUID: uid, ID: ctrID, Runtime: "containerd"},
		},
		{
			name: "v2 sub-cgroup made inside the container",
			data: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/crio-" + ctrID + ".scope/container",
			want: Container{PodUID: uid, ID: ctrID, Runtime: "cri-o"},
		},
		{
			name: "v2 inside a kind node",
			data: "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + uidU + ".slice/cri-containerd-" + ctrID + ".scope",
			want: Container{PodUID: uid, ID: ctrID, Runtime: "containerd"},
		},
		{
			name: "v1 cgroupfs docker, several controllers",
			data: strings.Join([]string{
				"12:hugetlb:/kubepods/besteffort/pod" + uid + "/" + ctrID,
				"11:memory:/kubepods/besteffort/pod" + uid + "/" + ctrID,
				"1:name=systemd:/kubepods/besteffort/pod" + uid + "/" + ctrID,
			}, "\n"),
			want: Container{PodUID: uid, ID: ctrID},
		},
		{
			name: "v1 guaranteed cgroupfs",
			data: "4:cpu,cpuacct:/kubepods/pod" + uid + "/" + ctrID,
			want: Container{PodUID: uid, ID: ctrID},
		},
		{
			name: "v1 systemd docker",
			data: "10:devices:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/docker-" + ctrID + ".scope",
			want: Container{PodUID: uid, ID: ctrID, Runtime: "docker"},
		},
		{
			name: "v1 containerd colon form",
			data: "7:pids:/system.slice/containerd.service/kubepods-burstable-pod" + uidU + ".slice:cri-containerd:" + ctrID,
			want: Container{PodUID: uid, ID: ctrID, Runtime: "containerd"},
		},
		{
			name: "v1 first lines outside pods, a later one inside",
			data: "13:rdma:/\n12:misc:/\n5:memory:/kubepods/burstable/pod" + uid + "/" + ctrID + "\n",
			want: Container{PodUID: uid, ID: ctrID},
		},
		{
			name: "hybrid: v2 line outside pods, v1 line inside",
			data: "1:name=systemd:/kubepods/burstable/pod" + uid + "/" + ctrID + "\n0::/init.scope\n",
			want: Container{PodUID: uid, ID: ctrID},
		},
		{
			name: "static pod UID",
			data: "0::/kubepods/burstable/pod" + staticUID + "/" + ctrID,
			want: Container{PodUID: staticUID, ID: ctrID},
		},
		{
			name: "short docker ID",
			data: "0::/kubepods/besteffort/pod" + uid + "/" + ctrID[:12],
			want: Container{PodUID: uid, ID: ctrID[:12]},
		},
		{name: "cri-o conmon", data: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/crio-conmon-" + ctrID + ".scope"},
		{name: "pod cgroup itself", data: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice"},
		{name: "QoS slice only", data: "0::/kubepods.slice/kubepods-besteffort.slice"},
		{name: "host session", data: "0::/user.slice/user-1000.slice/session-3.scope"},
		{name: "systemd service", data: "0::/system.slice/tessera-agent.service"},
		{name: "root", data: "0::/"},
		{name: "empty", data: ""},
		{name: "malformed", data: "garbage\n::\n"},
		{name: "bad pod UID", data: "0::/kubepods/burstable/podnot-a-uid/" + ctrID},
		{name: "bad container ID", data: "0::/kubepods/burstable/pod" + uid + "/NOTHEX"},
		{name: "unknown colon runtime", data: "7:pids:/system.slice/containerd.service/kubepods-burstable-pod" + uidU + ".slice:other:" + ctrID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ParseCgroup(c.data)
			if ok != (c.want != Container{}) || got != c.want {
				t.Fatalf("ParseCgroup = %+v, %v; want %+v", got, ok, c.want)
			}
		})
	}
}

func FuzzParseCgroup(f *testing.F) {
	f.Add("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + ctrID + ".scope")
	f.Add("7:pids:/system.slice/containerd.service/kubepods-burstable-pod" + uidU + ".slice:cri-containerd:" + ctrID)
	f.Add("11:memory:/kubepods/besteffort/pod" + uid + "/" + ctrID)
	f.Fuzz(func(t *testing.T, data string) {
		c, ok := ParseCgroup(data)
		if ok && (!validUID(c.PodUID) || !validContainerID(c.ID)) {
			t.Fatalf("accepted %+v from %q", c, data)
		}
		if !ok && c != (Container{}) {
			t.Fatalf("rejected but returned %+v", c)
		}
	})
}
