package testcluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tessera-gpu/tessera/test/toolbin"
)

// Cluster is a running etcd + kube-apiserver (+ optionally KWOK) on loopback.
type Cluster struct {
	// Host is the API server's URL (https://127.0.0.1:PORT).
	Host string
	// Token is a bearer token of a cluster-admin user.
	Token string
	// Kubeconfig is the path of a kubeconfig file for Host and Token.
	Kubeconfig string
	// Dir holds the cluster's data, certificates and logs.
	Dir string

	etcd, kwok, kubeScheduler *process
	controllerManager         *process
	etcdURL                   string
	readyTimeout              time.Duration
	users                     map[string]string // extra users -> tokens
	auditLog                  string

	// mu guards what RestartAPIServer and StartProcess change while tests
	// read logs from other goroutines.
	mu        sync.Mutex
	apiserver *process
	apiBin    string
	apiArgs   []string
	extra     []*process // started by StartProcess
	// cleanups run at Stop, after the processes stopped (files a
	// component needed outside the cluster's folder).
	cleanups []func()
}

// Options tunes Start.
type Options struct {
	// Dir is where data and logs go; a new temporary folder when empty.
	Dir string
	// ReadyTimeout bounds the wait for each component (default 60s). It is a
	// liveness bound for a broken build, not a performance assertion.
	ReadyTimeout time.Duration
	// Users are more cluster-admin users, each with a token of its own (see
	// KubeconfigFor): separate identities in the audit log, for instance
	// one per scheduler replica.
	Users []string
	// AuditPolicy, when set, is an audit.k8s.io/v1 Policy (YAML); the API
	// server then writes its audit events as JSON lines to AuditLog().
	AuditPolicy string
	// Workloads runs what a real cluster needs for workload objects on a
	// real node (StartRealNode): kube-controller-manager with the
	// DaemonSet, Deployment, ReplicaSet, service-account, root-CA,
	// endpoint and garbage-collector controllers, the ServiceAccount
	// admission plugin (pods get their API token), and webhooks reached
	// through their Service's endpoints (no kube-proxy runs).
	Workloads bool
	// Controllers are more kube-controller-manager controllers to run (by
	// their --controllers names, e.g. persistentvolume-binder-controller),
	// with or without Workloads.
	Controllers []string
	// FeatureGates are given to kube-apiserver and kube-controller-manager
	// (--feature-gates, each "Name=true"), and RuntimeConfig to
	// kube-apiserver (--runtime-config, each "group/version=true"): for
	// APIs behind a gate, such as the Workload API (GenericWorkload,
	// scheduling.k8s.io/v1beta1).
	FeatureGates, RuntimeConfig []string
}

// Start builds (or takes from the cache) etcd and kube-apiserver and starts
// them on loopback. Call Stop when done.
func Start(ctx context.Context, opt Options) (c *Cluster, err error) {
	if opt.ReadyTimeout == 0 {
		opt.ReadyTimeout = 60 * time.Second
	}
	etcdBin, err := toolbin.Binary(ctx, "etcd")
	if err != nil {
		return nil, err
	}
	apiBin, err := toolbin.Binary(ctx, "kube-apiserver")
	if err != nil {
		return nil, err
	}
	dir := opt.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tessera-cluster-"); err != nil {
			return nil, fmt.Errorf("create cluster folder: %w", err)
		}
	}
	c = &Cluster{Dir: dir, readyTimeout: opt.ReadyTimeout, users: map[string]string{}}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	c.etcdURL = etcdURL
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	c.etcd, err = startProcess("etcd", etcdBin, dir,
		"--name=tessera-test", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=tessera-test="+peerURL, "--unsafe-no-fsync=true",
		"--log-level=warn")
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, opt.ReadyTimeout)
	defer cancel()
	if err := c.etcd.waitFor(wctx, httpOK(http.DefaultClient, etcdURL+"/health", "")); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(wctx, apiBin, etcdURL, ports[2], opt); err != nil {
		return nil, err
	}
	if opt.Workloads || len(opt.Controllers) > 0 {
		if err := c.startControllerManager(ctx, opt); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func newToken() (string, error) {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return "", fmt.Errorf("make a token: %w", err)
	}
	return hex.EncodeToString(tok), nil
}

func (c *Cluster) startAPIServer(ctx context.Context, bin, etcdURL string, port int, opt Options) error {
	var err error
	if c.Token, err = newToken(); err != nil {
		return err
	}
	c.Host = "https://127.0.0.1:" + strconv.Itoa(port)
	tokens := filepath.Join(c.Dir, "tokens.csv")
	lines := c.Token + `,admin,admin,"system:masters"` + "\n"
	for _, u := range opt.Users {
		if u == "" || u == "admin" || strings.ContainsAny(u, ",\"\n") || c.users[u] != "" {
			return fmt.Errorf("options: user %q: must be a unique name other than admin, without commas or quotes", u)
		}
		if c.users[u], err = newToken(); err != nil {
			return err
		}
		lines += fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", c.users[u], u, u)
	}
	if err := os.WriteFile(tokens, []byte(lines), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	saKey := filepath.Join(c.Dir, "sa.key")
	if err := writeRSAKey(saKey); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, []byte(c.kubeconfigOf("admin", c.Token)), 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	args := []string{"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.Dir, "certs"),
		"--token-auth-file=" + tokens, "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saKey, "--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// A loopback advertise address is refused by the endpoint reconciler,
		// and no test needs the kubernetes Service endpoints.
		"--endpoint-reconciler-type=none",
		// No node-lifecycle controller runs: nothing would lift the
		// not-ready taints that TaintNodesByCondition puts on new nodes once
		// they report Ready.
		"--disable-admission-plugins=" + disabledAdmission(opt.Workloads),
		"--enable-priority-and-fairness=false", "--profiling=false", "--v=0",
		// As real clusters (kubeadm) do: node agents run privileged.
		"--allow-privileged=true",
		// A real node's kubelet serves logs and exec on its InternalIP.
		"--kubelet-preferred-address-types=InternalIP"}
	if opt.Workloads {
		// Webhooks are called at their Service's endpoints, not its
		// cluster IP: no kube-proxy runs.
		args = append(args, "--enable-aggregator-routing=true")
	}
	if len(opt.FeatureGates) > 0 {
		args = append(args, "--feature-gates="+strings.Join(opt.FeatureGates, ","))
	}
	if len(opt.RuntimeConfig) > 0 {
		args = append(args, "--runtime-config="+strings.Join(opt.RuntimeConfig, ","))
	}
	if opt.AuditPolicy != "" {
		policy := filepath.Join(c.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(opt.AuditPolicy), 0o600); err != nil {
			return fmt.Errorf("write audit policy: %w", err)
		}
		c.auditLog = filepath.Join(c.Dir, "audit.log")
		args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+c.auditLog, "--audit-log-format=json", "--audit-log-mode=blocking")
	}
	c.apiBin, c.apiArgs = bin, args
	return c.launchAPIServer(ctx)
}

// launchAPIServer starts kube-apiserver with the arguments of the first
// start and waits until it is ready.
func (c *Cluster) launchAPIServer(ctx context.Context) error {
	p, err := startProcess("kube-apiserver", c.apiBin, c.Dir, c.apiArgs...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.apiserver = p
	c.mu.Unlock()
	return p.waitFor(ctx, httpOK(c.HTTPClient(), c.Host+"/readyz", c.Token))
}

// HTTPClient returns a client for Host that skips TLS verification (the
// API server's certificate is self-signed on loopback); add the bearer Token.
func (c *Cluster) HTTPClient() *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
}

func (c *Cluster) kubeconfigOf(user, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: tessera-test
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: %[2]s
  user:
    token: %[3]s
contexts:
- name: tessera-test
  context:
    cluster: tessera-test
    user: %[2]s
current-context: tessera-test
`, c.Host, user, token)
}

// Stop ends every component. The data folder is left for post-mortems;
// tests that pass remove it with RemoveAll.
func (c *Cluster) Stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	extra, api, cleanups := c.extra, c.apiserver, c.cleanups
	c.cleanups = nil
	c.mu.Unlock()
	for _, p := range extra {
		p.stop(5 * time.Second)
	}
	c.kubeScheduler.stop(5 * time.Second)
	c.controllerManager.stop(5 * time.Second)
	c.kwok.stop(5 * time.Second)
	api.stop(10 * time.Second)
	c.etcd.stop(5 * time.Second)
	for _, f := range cleanups {
		f()
	}
}

// Logs returns the tail of a component's log ("etcd", "kube-apiserver",
// "kwok", or the name given to StartProcess).
func (c *Cluster) Logs(name string, lines int) string {
	c.mu.Lock()
	procs := append([]*process{c.etcd, c.apiserver, c.kwok, c.kubeScheduler, c.controllerManager}, c.extra...)
	c.mu.Unlock()
	for _, p := range procs {
		if p != nil && p.name == name {
			return p.logTail(lines)
		}
	}
	return ""
}

func httpOK(client *http.Client, url, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return fmt.Errorf("write service-account key: %w", err)
	}
	return nil
}
