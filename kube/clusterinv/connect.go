package clusterinv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tessera-gpu/tessera/kube/gpunode"
)

// ErrNoKubeconfig is returned (wrapped) by Connect when no kubeconfig is
// found and the process does not run inside a cluster.
var ErrNoKubeconfig = errors.New("no kubeconfig found")

// Options chooses a cluster the way kubectl does.
type Options struct {
	// Kubeconfig is a kubeconfig file (--kubeconfig). Empty: the files of
	// $KUBECONFIG (a list separated by the OS's path-list separator,
	// merged as kubectl merges them), else ~/.kube/config, else the
	// in-cluster service account.
	Kubeconfig string
	// Context is the kubeconfig context to use (--context); empty: the
	// current context.
	Context string
}

// Cluster is a cluster found by Connect.
type Cluster struct {
	// Context is the kubeconfig context used ("in-cluster" inside a pod).
	Context string
	// Server is the API server's address.
	Server string
	// Config is the REST configuration of the clients.
	Config *rest.Config
}

// Where names the cluster for messages: its context and server.
func (c *Cluster) Where() string {
	return fmt.Sprintf("context %q, server %s", c.Context, c.Server)
}

// ConfigError is the error of Connect: the kubeconfig or the context
// cannot be used (as opposed to a cluster that cannot be read).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Connect loads the kubeconfig that opt and the environment select and
// checks the context. It does not contact the server (see Probe). Its
// errors are *ConfigError.
func Connect(opt Options) (*Cluster, error) {
	c, err := connect(opt)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	return c, nil
}

func connect(opt Options) (*Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = opt.Kubeconfig
	if opt.Kubeconfig != "" {
		if _, err := os.Stat(opt.Kubeconfig); err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", opt.Kubeconfig, err)
		}
	}
	files := describeFiles(rules)
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: opt.Context})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig (%s): %w", files, err)
	}
	known := make([]string, 0, len(raw.Contexts))
	for name := range raw.Contexts {
		known = append(known, name)
	}
	slices.Sort(known)
	if len(known) == 0 && opt.Context == "" {
		// No kubeconfig at all: inside a pod, the service account.
		cfg, err := cc.ClientConfig()
		if err != nil {
			if clientcmd.IsEmptyConfig(err) {
				return nil, fmt.Errorf("%w (looked at %s; not running inside a cluster): set --kubeconfig or KUBECONFIG", ErrNoKubeconfig, files)
			}
			return nil, fmt.Errorf("kubeconfig (%s): %w", files, err)
		}
		return &Cluster{Context: "in-cluster", Server: cfg.Host, Config: cfg}, nil
	}
	name := opt.Context
	switch {
	case name != "" && raw.Contexts[name] == nil:
		return nil, fmt.Errorf("--context %q: no such context in %s; available: %s", name, files, listOrNone(known))
	case name == "" && raw.CurrentContext == "":
		return nil, fmt.Errorf("kubeconfig (%s) sets no current-context: choose one with --context (available: %s)", files, listOrNone(known))
	case name == "" && raw.Contexts[raw.CurrentContext] == nil:
		return nil, fmt.Errorf("kubeconfig (%s): current-context %q is not defined; choose one with --context (available: %s)", files, raw.CurrentContext, listOrNone(known))
	case name == "":
		name = raw.CurrentContext
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig (%s), context %q: %w", files, name, err)
	}
	return &Cluster{Context: name, Server: cfg.Host, Config: cfg}, nil
}

// describeFiles lists the kubeconfig files the rules read, for messages.
func describeFiles(rules *clientcmd.ClientConfigLoadingRules) string {
	if rules.ExplicitPath != "" {
		return "--kubeconfig " + rules.ExplicitPath
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		var present []string
		for _, f := range filepath.SplitList(env) {
			if _, err := os.Stat(f); err == nil {
				present = append(present, f)
			}
		}
		if len(present) == 0 {
			return fmt.Sprintf("$KUBECONFIG=%s: none of its files exists", env)
		}
		return "$KUBECONFIG " + strings.Join(present, ", ")
	}
	return clientcmd.RecommendedHomeFile
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Clients returns a clientset and a dynamic client for the cluster; a
// timeout above zero bounds every request.
func (c *Cluster) Clients(timeout time.Duration) (kubernetes.Interface, dynamic.Interface, error) {
	cfg := rest.CopyConfig(c.Config)
	cfg.Timeout = timeout
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client (%s): %w", c.Where(), err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes dynamic client (%s): %w", c.Where(), err)
	}
	return client, dyn, nil
}

// Probe checks, within timeout, that the server answers and serves
// GPUNode objects to this user: nil means Read can work.
func (c *Cluster) Probe(ctx context.Context, timeout time.Duration) error {
	_, dyn, err := c.Clients(timeout)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := dyn.Resource(gpunode.Resource()).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return explain(err, c.Server, "list", "gpunodes.tessera.io")
	}
	return nil
}
