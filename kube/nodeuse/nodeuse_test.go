package nodeuse

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/gpuuse"
)

func TestDeployedCRDIsTheEmbeddedOne(t *testing.T) {
	deployed, err := os.ReadFile("../../deploy/crds/tessera.io_gpuuses.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(deployed, Manifest()) {
		t.Errorf("deploy/crds/tessera.io_gpuuses.yaml differs from kube/nodeuse/crd.yaml; copy one onto the other")
	}
}

func sample() Status {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	busy, mem := int64(420), int64(2048)
	share := gpuuse.Share{Workload: "ns/train", GPU: "GPU-a", Index: 0,
		Booked: gpuuse.Booked{GuaranteedMilli: 500, LimitMilli: 1000, MemoryMiB: 4096, MemoryLimitMiB: 8192},
		Use:    gpuuse.Use{Source: gpuuse.Simulated, BusyMilli: &busy, From: at.Add(-10 * time.Second), At: at, MemoryUsedMiB: &mem},
		Idle:   &gpuuse.Idle{Since: at.Add(-time.Hour)}}
	g := gpuuse.GPU{GPU: "GPU-a", Index: 0, Shares: []gpuuse.Share{share}}
	g.Sum("no workload holds it")
	bare := gpuuse.GPU{GPU: "GPU-b", Index: 1}
	bare.Sum("no workload holds it")
	return Status{Source: "sim", At: at, Rule: Rule{WindowSeconds: 10, IdleBelowMilli: 50, IdleAfterSeconds: 600, Metered: true}, GPUs: []gpuuse.GPU{g, bare}}
}

func TestObjectRoundTrip(t *testing.T) {
	want := sample()
	u, err := Object("node-1", want)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetName() != "node-1" || u.GetKind() != "GPUUse" {
		t.Fatalf("object %s %s, want GPUUse node-1", u.GetKind(), u.GetName())
	}
	got, err := FromObject(u)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

func TestFromObjectRefusesUnknownSource(t *testing.T) {
	st := sample()
	st.GPUs[0].Shares[0].Use.Source = "guessed"
	u, err := Object("node-1", st)
	if err != nil {
		t.Fatal(err)
	}
	_, err = FromObject(u)
	if err == nil || !strings.Contains(err.Error(), "status.gpus[0].shares[0].use.source") || !strings.Contains(err.Error(), `"guessed"`) {
		t.Errorf("FromObject = %v, want an error naming status.gpus[0].shares[0].use.source and the value", err)
	}
	delete(u.Object, "status")
	if _, err := FromObject(u); err == nil || !strings.Contains(err.Error(), "status is missing") {
		t.Errorf("FromObject without status = %v, want status is missing", err)
	}
}
