package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/kube/crd"
	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// Gangs declared through other systems' objects (issue 36 item 5), on the
// real control plane with KWOK nodes and the PV binder.

// gangAPI is one way of declaring a gang: make the group object, and make
// a pod a member of it (key is the gang's key in Tessera's messages).
type gangAPI struct {
	makeGroup func(name string, min int32)
	join      func(p *corev1.Pod, group string)
	key       func(group string) string
}

// runGangScenario: a gang of 3 one-GPU pods on a 2-GPU node binds none and
// says why, and binds all 3 once a second GPU node appears; a gang mixing a
// GPU pod, a CPU-only pod and a pod whose claim is bound to a local volume
// on a node not there yet binds none (the two that would fit alone wait)
// and binds all 3, the volume's pod on its node, once that node appears;
// a member of a group that does not exist is not bound and says so, and
// is bound once the group is made. The scheduler runs from start() on.
func runGangScenario(ctx context.Context, t *testing.T, client kubernetes.Interface, api gangAPI, start func() (stop func())) {
	t.Helper()
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	create(ctx, t, client.StorageV1().StorageClasses().Create, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wait})
	boundVolume(ctx, t, client, "mix-data", "local", volumeOn("vol-0"), nil)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	api.makeGroup("trio", 3)
	api.makeGroup("mix", 3)
	member := func(name, group string, limits corev1.ResourceList, edit func(*corev1.PodSpec)) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{SchedulerName: DefaultName, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "main", Image: "example.invalid/none",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, Limits: limits},
			}}}}
		if edit != nil {
			edit(&p.Spec)
		}
		api.join(p, group)
		mustCreatePod(ctx, t, client, p)
	}
	gpu := corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}
	for i := range 3 {
		member(fmt.Sprintf("trio-%d", i), "trio", gpu, nil)
	}
	member("mix-gpu", "mix", gpu, nil)
	member("mix-cpu", "mix", nil, nil)
	member("mix-vol", "mix", nil, func(s *corev1.PodSpec) {
		s.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "mix-data"}}}}
	})
	stop := start()
	defer stop()

	waitFor(t, "trio says why none is placed", func() error {
		return hasCondition(ctx, client, "trio-0", corev1.PodReasonUnschedulable, "gang "+api.key("trio")+": only 2 of the 3 members still needed fit, so none is placed")
	})
	waitFor(t, "mix says why none is placed", func() error {
		return hasCondition(ctx, client, "mix-gpu", corev1.PodReasonUnschedulable, "gang "+api.key("mix")+": only 2 of the 3 members still needed fit, so none is placed")
	})
	for _, prefix := range []string{"trio-", "mix-"} {
		if err := countBound(ctx, client, prefix, 0); err != nil {
			t.Fatal(err)
		}
	}

	createGPUNode(ctx, t, client, "gpu-1", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	waitFor(t, "trio bound once room appears", func() error { return countBound(ctx, client, "trio-", 3) })
	if err := countBound(ctx, client, "mix-", 0); err != nil {
		t.Fatalf("mix without its volume's node: %v", err)
	}
	kfNode(ctx, t, client, "vol-0", "vol", nil, nil)
	waitFor(t, "mix bound once its volume's node appears", func() error { return countBound(ctx, client, "mix-", 3) })
	p, err := client.CoreV1().Pods("default").Get(ctx, "mix-vol", metav1.GetOptions{})
	if err != nil || p.Spec.NodeName != "vol-0" {
		t.Fatalf("mix-vol on %q (err %v), want vol-0, its volume's node", p.Spec.NodeName, err)
	}
	// A member of a group never made waits, saying so (it would fit alone).
	member("lost-0", "lost", nil, nil)
	waitFor(t, "a missing group reported", func() error {
		return hasCondition(ctx, client, "lost-0", reasonInvalid, "PodGroup default/lost ")
	})
	if err := hasCondition(ctx, client, "lost-0", reasonInvalid, " not found"); err != nil {
		t.Fatal(err)
	}
	api.makeGroup("lost", 1)
	waitFor(t, "the member bound once its group is made", func() error { return countBound(ctx, client, "lost-", 1) })
}

// TestSchedulerPluginsGangs: pods labelled scheduling.x-k8s.io/pod-group,
// as Kubeflow's training operator and JobSet write them, form the gang of
// that scheduler-plugins PodGroup (its minMember), all or nothing.
func TestSchedulerPluginsGangs(t *testing.T) {
	ctx, _, cfg := testcluster.ForTestWith(t, true, testcluster.Options{Controllers: []string{testcluster.PVBinderController}})
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	if err := crd.Install(ctx, dyn, podgroups.SchedulerPluginsManifest()); err != nil {
		t.Fatal(err)
	}
	gvr := podgroups.SchedulerPluginsResource()
	api := gangAPI{
		makeGroup: func(name string, min int32) {
			t.Helper()
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": gvr.GroupVersion().String(), "kind": "PodGroup",
				"metadata": map[string]any{"name": name, "namespace": "default"},
				"spec":     map[string]any{"minMember": int64(min), "scheduleTimeoutSeconds": int64(600)},
			}}
			if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		join: func(p *corev1.Pod, group string) {
			p.Labels = map[string]string{workload.SchedulerPluginsLabelPodGroup: group}
		},
		key: func(group string) string { return "default/x-k8s:" + group },
	}
	runGangScenario(ctx, t, client, api, func() func() { return startScheduler(ctx, t, client, dyn, nil) })
}

// workloadAPIOptions runs the Workload API as kube-apiserver v1.37.2
// serves it (GenericWorkload, scheduling.k8s.io/v1beta1) with the Job
// controller making Workloads and PodGroups for Jobs (WorkloadWithJob),
// and the PV binder.
func workloadAPIOptions() testcluster.Options {
	return testcluster.Options{
		Controllers:   []string{testcluster.PVBinderController, "job-controller"},
		FeatureGates:  []string{"GenericWorkload=true", "WorkloadWithJob=true"},
		RuntimeConfig: []string{schedulingv1beta1.SchemeGroupVersion.String() + "=true"},
	}
}

// TestWorkloadAPIGangs: pods naming a Kubernetes PodGroup
// (scheduling.k8s.io, gang policy) in spec.schedulingGroup form its gang
// of minCount, all or nothing; a Job asking for a gang of 2 of its 3 pods
// gets its Workload and PodGroup from the Job controller, and its pods
// wait until 2 fit, then 2 bind (its own minCount, not the automatic gang
// of its parallelism).
func TestWorkloadAPIGangs(t *testing.T) {
	ctx, _, cfg := testcluster.ForTestWith(t, true, workloadAPIOptions())
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	api := gangAPI{
		makeGroup: func(name string, min int32) {
			t.Helper()
			create(ctx, t, client.SchedulingV1beta1().PodGroups("default").Create, &schedulingv1beta1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
					Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: min}}},
			})
		},
		join: func(p *corev1.Pod, group string) {
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group}
		},
		key: func(group string) string { return "default/podgroup:" + group },
	}
	runGangScenario(ctx, t, client, api, func() func() { return startScheduler(ctx, t, client, dyn, nil) })
	p, err := client.CoreV1().Pods("default").Get(ctx, "trio-0", metav1.GetOptions{})
	if err != nil || membership.SchedulingGroup(p) != "trio" {
		t.Fatalf("trio-0 lost its spec.schedulingGroup (err %v): the API server does not serve the Workload API as set up", err)
	}

	// Every GPU is taken (trio 3, mix 1 of 4). A Job of 3 one-GPU pods
	// asking for a gang of 2, scheduled by Tessera.
	stop := startScheduler(ctx, t, client, dyn, nil)
	defer stop()
	parallelism, minCount := int32(3), int32(2)
	create(ctx, t, client.BatchV1().Jobs("default").Create, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "default"},
		Spec: batchv1.JobSpec{Parallelism: &parallelism, Completions: &parallelism,
			Scheduling: &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: &minCount}}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: DefaultName, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}}}}}},
	})
	var group string
	waitFor(t, "the Job controller's pods name its PodGroup and wait as its gang", func() error {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=train"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 3 {
			return fmt.Errorf("%d pods of Job train, want 3", len(pods.Items))
		}
		for _, p := range pods.Items {
			if group = membership.SchedulingGroup(&p); group == "" {
				return fmt.Errorf("pod %s names no PodGroup", p.Name)
			}
			if err := hasCondition(ctx, client, p.Name, corev1.PodReasonUnschedulable, "gang default/podgroup:"+group+": "); err != nil {
				return err
			}
		}
		return nil
	})
	pg, err := client.SchedulingV1beta1().PodGroups("default").Get(ctx, group, metav1.GetOptions{})
	if err != nil || pg.Spec.SchedulingPolicy.Gang == nil || pg.Spec.SchedulingPolicy.Gang.MinCount != minCount {
		t.Fatalf("PodGroup %s: %+v (err %v), want a gang of %d", group, pg, err, minCount)
	}
	// Two GPUs freed: the gang's 2 fit and bind, the third waits.
	for _, name := range []string{"trio-0", "trio-1"} {
		if err := client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "2 of Job train bound, 1 waiting", func() error {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=train"})
		if err != nil {
			return err
		}
		var bound []string
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound = append(bound, p.Name)
			}
		}
		if len(bound) != 2 {
			return fmt.Errorf("bound %s, want 2 pods of Job train", strings.Join(bound, ", "))
		}
		return nil
	})
}
