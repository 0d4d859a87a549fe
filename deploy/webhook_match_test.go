package deploy

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/kube/admission"
)

// TestWebhookSeesEveryTranslatedKey: the chart's match condition that
// sends pods to the webhook is the expression built from the admission
// webhook's translation table, so a key added to the table cannot be
// missed by the API server (a pod using it would reach kubelet
// untranslated). deploy/webhook.yaml is the chart's render (kept equal by
// TestManifestsAreRenderedFromTheChart).
func TestWebhookSeesEveryTranslatedKey(t *testing.T) {
	objs, err := readManifest("webhook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, o := range objs {
		if o.GetKind() != "MutatingWebhookConfiguration" {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			conds, _, _ := unstructured.NestedSlice(h.(map[string]any), "matchConditions")
			for _, c := range conds {
				c := c.(map[string]any)
				if c["name"] != "foreign-gpu-request" {
					continue
				}
				found++
				if c["expression"] != admission.MatchExpression() {
					t.Errorf("webhook %v: match condition foreign-gpu-request is\n%v\nwant admission.MatchExpression():\n%s\n(copy it into deploy/helm/tessera/templates/webhook.yaml, then make manifests)",
						h.(map[string]any)["name"], c["expression"], admission.MatchExpression())
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("webhook.yaml has no foreign-gpu-request match condition")
	}
}
