package kubefilter

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

const (
	hostname = "kubernetes.io/hostname"
	zoneKey  = "topology.kubernetes.io/zone"
)

// newFilter builds a Filter over a fake clientset holding objs (volumes,
// claims, classes), with nodes and bound pods mirrored into its cache.
func newFilter(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod, objs ...runtime.Object) *Filter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	f, err := New(ctx, Config{SchedulerName: "tessera", Client: client, Informers: factory})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer %v did not sync", typ)
		}
	}
	for _, n := range nodes {
		f.AddNode(n)
	}
	for _, p := range pods {
		if err := f.AddPod(p); err != nil {
			t.Fatalf("AddPod %s: %v", p.Name, err)
		}
	}
	return f
}

// node: 8 CPUs, 32Gi, 110 pods, plus extra allocatable.
func node(name, zone string, extra corev1.ResourceList) *corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for k, v := range extra {
		alloc[k] = v
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hostname: name}},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	if zone != "" {
		n.Labels[zoneKey] = zone
	}
	return n
}

// pod: one container asking 100m CPU, plus req; on nodeName when set.
func pod(name, nodeName string, labels map[string]string, req corev1.ResourceList) *corev1.Pod {
	r := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	for k, v := range req {
		r[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:      nodeName,
			SchedulerName: "tessera",
			Containers:    []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{Requests: r, Limits: limitsOf(r)}}},
		},
	}
}

// limitsOf: extended resources and hugepages need limits equal to requests.
func limitsOf(r corev1.ResourceList) corev1.ResourceList {
	l := corev1.ResourceList{}
	for k, v := range r {
		if k != corev1.ResourceCPU && k != corev1.ResourceMemory {
			l[k] = v
		}
	}
	return l
}

func with(p *corev1.Pod, edit func(*corev1.Pod)) *corev1.Pod { edit(p); return p }

func term(key, value, topology string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
		TopologyKey:   topology,
	}
}

func antiAffinity(terms ...corev1.PodAffinityTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
	}
}

func affinity(terms ...corev1.PodAffinityTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
	}
}

func spread(when corev1.UnsatisfiableConstraintAction, app string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: when,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		}}
	}
}

func hostPort(port int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port, Protocol: corev1.ProtocolTCP}}
	}
}

func claim(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}
}

// localClass is the storage class of local volumes (WaitForFirstConsumer,
// no provisioner).
func localClass() runtime.Object {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wait}
}

// localVolume: a local PersistentVolume on node, bound to claim name.
func localVolume(name, nodeName string) []runtime.Object {
	fs := corev1.PersistentVolumeFilesystem
	return []runtime.Object{
		&corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName:       "local",
				VolumeMode:             &fs,
				PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/" + name}},
				ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: name, UID: types.UID("uid-pvc-" + name)},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostname, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}},
				}}}},
			},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
		},
		&corev1.PersistentVolumeClaim{
			// The annotation is the PV controller's mark of a finished bind.
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-pvc-" + name),
				Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr("local"),
				VolumeName:       "pv-" + name,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func nodeNames(nodes []*corev1.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

// freeLocalVolume: an unbound local PersistentVolume on node, and an
// unbound claim name of the local class (WaitForFirstConsumer): the
// scheduler's pick decides which volume binds it.
func freeLocalVolume(volume, nodeName string) runtime.Object {
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: volume},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:       "local",
			VolumeMode:             &fs,
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/" + volume}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostname, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}},
			}}}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
}

func unboundClaim(name string) runtime.Object {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-pvc-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr("local"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
}
