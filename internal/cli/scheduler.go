package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tessera-gpu/tessera/kube/scheduler"
	"github.com/tessera-gpu/tessera/placement"
)

func newSchedulerCommand(a *app) *cobra.Command {
	var (
		kubeconfig string
		name       string
		policy     string
		seed       uint64
	)
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the Kubernetes scheduler for pods with schedulerName: tessera",
		Long: `Run Tessera's Kubernetes scheduler. Pods that set spec.schedulerName to
--name are placed by the placement engine; their GPU assignment is written
to the annotation tessera.io/assignment before they are bound. See docs/api.md
for the resources and annotations a pod uses.

In a cluster it uses the pod's service account; outside, --kubeconfig.`,
		Example: `  tessera scheduler --kubeconfig ~/.kube/config --policy tessera`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("kubernetes client: %w", err)
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("kubernetes dynamic client: %w", err)
			}
			s, err := scheduler.New(scheduler.Config{Client: client, Dynamic: dyn, Name: name, Policy: policy, Seed: seed, Catalog: a.catalog, Log: a.log})
			if err != nil {
				return err
			}
			return s.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, then $KUBECONFIG, then ~/.kube/config)")
	cmd.Flags().StringVar(&name, "name", scheduler.DefaultName, "the schedulerName this scheduler serves")
	cmd.Flags().StringVar(&policy, "policy", placement.DefaultPolicy, fmt.Sprintf("placement policy: one of %v", placement.Names()))
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed for tie-breaking (decisions are reproducible for a given seed)")
	return cmd
}
