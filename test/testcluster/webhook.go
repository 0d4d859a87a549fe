package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// WebhookFromManifest returns the MutatingWebhookConfiguration of the
// manifest at path (deploy/webhook.yaml), so that a test registers the
// rules and match conditions the install ships.
func WebhookFromManifest(path string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the webhook manifest: %w", err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%s has no MutatingWebhookConfiguration", path)
			}
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		if obj.GetKind() != "MutatingWebhookConfiguration" {
			continue
		}
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &mwc); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &mwc, nil
	}
}
