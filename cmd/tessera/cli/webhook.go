package cli

import (
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/kube/admission"
	"github.com/tessera-gpu/tessera/kube/scheduler"
)

func newWebhookCommand(a *app) *cobra.Command {
	var (
		certFile, keyFile, name, bind string
		port                          int
	)
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve the mutating admission webhook that translates other GPU schedulers' keys into Tessera's",
		Long: `Serve Tessera's mutating admission webhook over HTTPS (POST /mutate,
AdmissionReview v1; GET /healthz). Pods with spec.schedulerName --scheduler-name
that ask for GPUs through HAMi's, KAI-Scheduler's, Volcano's, nvshare's or
NVIDIA's keys get Tessera's (tessera.io/gpu, so kubelet hands them to the node
agent, and Tessera's annotations: docs/migration.md has the table); batch/v1
Jobs get the same in their pod template when created, plus
tessera.io/gpu-milli for quota systems such as Kueue. Invalid requests are
denied with the key, the value and the allowed range. Other pods are left
untouched.

The serving certificate and key are read from files (a kubernetes.io/tls
Secret, for example issued by cert-manager) and re-read when they change. The
MutatingWebhookConfiguration must carry the CA that signed them; see
deploy/webhook.yaml and docs/api.md.`,
		Example: `  tessera webhook --tls-cert-file /etc/tessera/webhook/tls.crt --tls-key-file /etc/tessera/webhook/tls.key`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port < 1 || port > 65535 {
				return fmt.Errorf("--port must be in [1, 65535], got %d", port)
			}
			if certFile == "" || keyFile == "" {
				return fmt.Errorf("--tls-cert-file and --tls-key-file must be set")
			}
			h, err := admission.New(admission.Config{SchedulerName: name, Catalog: a.catalog, Log: a.log})
			if err != nil {
				return fmt.Errorf("--scheduler-name: %w", err)
			}
			srv, err := admission.NewServer(admission.ServerConfig{CertFile: certFile, KeyFile: keyFile, Handler: h, Log: a.log})
			if err != nil {
				return fmt.Errorf("--tls-cert-file/--tls-key-file: %w", err)
			}
			ln, err := net.Listen("tcp", net.JoinHostPort(bind, strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("--port %d: %w", port, err)
			}
			return srv.Serve(cmd.Context(), ln)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&certFile, "tls-cert-file", "", "PEM serving certificate (with intermediates); re-read when it changes")
	fl.StringVar(&keyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fl.IntVar(&port, "port", 8443, "HTTPS port")
	fl.StringVar(&bind, "bind-address", "", `address to listen on ("" for all)`)
	fl.StringVar(&name, "scheduler-name", scheduler.DefaultName, "mutate only pods with this spec.schedulerName (the scheduler's --name)")
	return cmd
}
