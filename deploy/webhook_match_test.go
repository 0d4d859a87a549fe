package deploy

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/kube/admission"
)

// TestWebhookSeesEveryTranslatedKey: the chart's match conditions that
// send pods, Jobs and JobSets to the webhook are the expressions built from the
// admission webhook's translation table, so a key added to the table cannot be
// missed by the API server (a pod using it would reach kubelet
// untranslated). deploy/webhook.yaml is the chart's render (kept equal by
// TestManifestsAreRenderedFromTheChart).
func TestWebhookSeesEveryTranslatedKey(t *testing.T) {
	objs, err := readManifest("webhook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	jobSetScheduler, jobSetRequest := admission.JobSetMatchExpressions("tessera") // manifests-values.yaml's schedulerName
	want := map[string]string{"gpu-request": admission.MatchExpression(), "gpu-request-in-template": admission.JobMatchExpression(),
		"gpu-request-in-jobset": jobSetRequest}
	found := map[string]int{}
	for _, o := range objs {
		if o.GetKind() != "MutatingWebhookConfiguration" {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			conds, _, _ := unstructured.NestedSlice(h.(map[string]any), "matchConditions")
			for _, c := range conds {
				c := c.(map[string]any)
				name, _ := c["name"].(string)
				if h.(map[string]any)["name"] == "jobset.gpu.tessera.io" && name == "tessera-scheduler" {
					// A JobSet's schedulerName is tested before it is read.
					found["jobset's tessera-scheduler"]++
					if c["expression"] != jobSetScheduler {
						t.Errorf("webhook jobset.gpu.tessera.io: match condition tessera-scheduler is\n%v\nwant (kube/admission):\n%s", c["expression"], jobSetScheduler)
					}
					continue
				}
				w, ok := want[name]
				if !ok {
					continue
				}
				found[name]++
				if c["expression"] != w {
					t.Errorf("webhook %v: match condition %s is\n%v\nwant (kube/admission):\n%s\n(copy it into deploy/helm/tessera/templates/webhook.yaml, then make manifests)",
						h.(map[string]any)["name"], name, c["expression"], w)
				}
			}
		}
	}
	if found["jobset's tessera-scheduler"] != 1 {
		t.Errorf("webhook.yaml has %d tessera-scheduler conditions on jobset.gpu.tessera.io, want 1", found["jobset's tessera-scheduler"])
	}
	for name := range want {
		if found[name] != 1 {
			t.Errorf("webhook.yaml has %d %s match conditions, want 1", found[name], name)
		}
	}
}
