package crdwatch

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestNotServed: Served tells a served resource from one of a group
// version the server does not know or lacks; a Watch of a resource not
// served lists nothing, without error, and finds nothing.
func TestNotServed(t *testing.T) {
	c := fake.NewClientset()
	c.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: "tessera.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "queues"}}},
	}
	queues := schema.GroupVersionResource{Group: "tessera.io", Version: "v1alpha1", Resource: "queues"}
	groups := queues.GroupVersion().WithResource("podgroups")
	other := schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	for gvr, want := range map[schema.GroupVersionResource]bool{queues: true, groups: false, other: false} {
		if got, err := Served(c, gvr); err != nil || got != want {
			t.Errorf("Served(%s) = %v, %v; want %v", gvr, got, err, want)
		}
	}
	w := New(context.Background(), groups, c, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), cache.ResourceEventHandlerFuncs{})
	if objs, err := w.List(); err != nil || len(objs) != 0 {
		t.Errorf("List of a resource not served: %v, %v", objs, err)
	}
	if _, found, err := w.GetIn("ns", "g"); err != nil || found {
		t.Errorf("GetIn of a resource not served: found %v, %v", found, err)
	}
}
