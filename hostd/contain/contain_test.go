package contain

import (
	"strings"
	"testing"
)

func TestParseCgroup2Mount(t *testing.T) {
	tests := []struct {
		name, mountinfo, want, wantErr string
	}{
		{
			name: "unified only",
			mountinfo: "25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw\n" +
				"28 25 0:25 / /sys/fs/cgroup rw,nosuid,nodev,noexec shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
			want: "/sys/fs/cgroup",
		},
		{
			name: "hybrid: v1 controllers beside a unified mount",
			mountinfo: "30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n" +
				"31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:5 master:1 - cgroup2 cgroup2 rw\n" +
				"32 30 0:28 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu\n",
			want: "/sys/fs/cgroup/unified",
		},
		{
			name:      "escaped space in the mount point",
			mountinfo: `40 25 0:30 / /mnt/my\040cgroups rw - cgroup2 none rw` + "\n",
			want:      "/mnt/my cgroups",
		},
		{
			name:      "v1 only",
			mountinfo: "32 30 0:28 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu\n",
			wantErr:   "no cgroup v2 hierarchy is mounted",
		},
		{
			name:      "empty",
			mountinfo: "",
			wantErr:   "no cgroup v2 hierarchy is mounted",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCgroup2Mount(strings.NewReader(tt.mountinfo))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseCgroup2Mount = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	tests := map[string]string{
		`/plain`:         "/plain",
		`/a\040b`:        "/a b",
		`/tab\011x\134y`: "/tab\tx\\y",
		`/trailing\04`:   `/trailing\04`,
		`/not\9octal`:    `/not\9octal`,
		`/end\040`:       "/end ",
	}
	for in, want := range tests {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScanMarkFindsOnlyTheMarkedProcess(t *testing.T) {
	// This test process does not carry the mark, so a fresh mark matches
	// nothing (and scanning /proc must not fail on processes it cannot read).
	pids, _, err := scanMark(MarkEnv + "=no-such-job-mark")
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 0 {
		t.Fatalf("scanMark found %v for a mark nobody carries", pids)
	}
}
