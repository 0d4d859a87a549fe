package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/kube/migrate"
	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/queues"
)

func newMigrateCommand(a *app) *cobra.Command {
	var (
		files         []string
		kubeconfig    string
		apply, dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Translate KAI-Scheduler and Volcano queues and pod groups into Tessera's",
		Long: `Reads KAI-Scheduler Queues (scheduling.run.ai/v2) and Volcano Queues and
PodGroups (scheduling.volcano.sh/v1beta1) from files (-f) or from the cluster
(--kubeconfig), and writes the Tessera Queue and PodGroup objects they become
to stdout as YAML, or applies them (--apply, --dry-run to have the API server
check them without storing). Every field that could not be carried over
exactly is reported on stderr. See docs/migration.md.`,
		Example: `  tessera migrate -f kai-queues.yaml > tessera-queues.yaml
  tessera migrate --kubeconfig ~/.kube/config --apply --dry-run`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun && !apply {
				return usageError("--dry-run: applies only with --apply (without --apply nothing is written to the cluster)")
			}
			ctx := cmd.Context()
			var objs []*unstructured.Unstructured
			var dyn dynamic.Interface
			if apply || len(files) == 0 {
				rules := clientcmd.NewDefaultClientConfigLoadingRules()
				rules.ExplicitPath = kubeconfig
				cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
				if err != nil {
					return fmt.Errorf("--kubeconfig: %w", err)
				}
				if dyn, err = dynamic.NewForConfig(cfg); err != nil {
					return fmt.Errorf("--kubeconfig: %w", err)
				}
			}
			if len(files) > 0 {
				for _, f := range files {
					got, err := readObjects(f)
					if err != nil {
						return err
					}
					objs = append(objs, got...)
				}
			} else {
				got, err := listUpstream(ctx, dyn, a.stderr)
				if err != nil {
					return err
				}
				objs = got
			}
			res := migrate.Translate(objs)
			for _, l := range res.Losses {
				fmt.Fprintf(a.stderr, "not carried over: %s\n", l)
			}
			if apply {
				return applyObjects(ctx, dyn, res.Objects, dryRun, a.stdout)
			}
			for _, o := range res.Objects {
				data, err := yaml.Marshal(o.Object)
				if err != nil {
					return fmt.Errorf("write %s %s: %w", o.GetKind(), o.GetName(), err)
				}
				fmt.Fprintf(a.stdout, "---\n%s", data)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&files, "filename", "f", nil, "YAML or JSON file of upstream objects (repeatable); empty: read them from the cluster")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (reading the cluster, or --apply); empty: the default loading rules")
	fl.BoolVar(&apply, "apply", false, "create or update the Tessera objects in the cluster instead of printing them")
	fl.BoolVar(&dryRun, "dry-run", false, "with --apply: the API server checks the objects without storing them")
	return cmd
}

// readObjects decodes every document of a YAML or JSON file, keeping whole
// numbers as integers.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-f: %w", err)
	}
	dec := yamlutil.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("-f %s: document %d: %w", path, i+1, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("-f %s: document %d: %w", path, i+1, err)
		}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("-f %s: document %d: %w", path, i+1, err)
			}
			for j := range list.Items {
				out = append(out, &list.Items[j])
			}
			continue
		}
		out = append(out, u)
	}
}

// upstreamResources are the resources `tessera migrate` reads from a cluster.
func upstreamResources() []schema.GroupVersionResource {
	return []schema.GroupVersionResource{
		{Group: "scheduling.run.ai", Version: "v2", Resource: "queues"},
		{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"},
		podgroups.VolcanoResource(),
	}
}

// listUpstream lists every upstream object of the cluster; a resource the
// cluster does not serve is skipped with a note.
func listUpstream(ctx context.Context, dyn dynamic.Interface, notes io.Writer) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, gvr := range upstreamResources() {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(notes, "skipped: %s is not served by this cluster\n", gvr.GroupResource())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// applyObjects creates each object, or updates it when it exists.
func applyObjects(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured, dryRun bool, out io.Writer) error {
	var opts []string
	suffix := ""
	if dryRun {
		opts, suffix = []string{metav1.DryRunAll}, " (dry run)"
	}
	for _, o := range objs {
		gvr := queues.Resource()
		var ri dynamic.ResourceInterface = dyn.Resource(gvr)
		if o.GetKind() == "PodGroup" {
			gvr = podgroups.Resource()
			ri = dyn.Resource(gvr).Namespace(o.GetNamespace())
		}
		what := strings.ToLower(o.GetKind()) + " " + o.GetName()
		if o.GetNamespace() != "" {
			what = strings.ToLower(o.GetKind()) + " " + o.GetNamespace() + "/" + o.GetName()
		}
		cur, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := ri.Create(ctx, o, metav1.CreateOptions{DryRun: opts}); err != nil {
				return fmt.Errorf("create %s: %w", what, err)
			}
			fmt.Fprintf(out, "%s created%s\n", what, suffix)
		case err != nil:
			return fmt.Errorf("get %s: %w (are Tessera's CRDs installed?)", what, err)
		default:
			o.SetResourceVersion(cur.GetResourceVersion())
			if _, err := ri.Update(ctx, o, metav1.UpdateOptions{DryRun: opts}); err != nil {
				return fmt.Errorf("update %s: %w", what, err)
			}
			fmt.Fprintf(out, "%s updated%s\n", what, suffix)
		}
	}
	return nil
}
