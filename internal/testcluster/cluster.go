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
	"time"
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

	etcd, apiserver, kwok, kubeScheduler *process
}

// Options tunes Start.
type Options struct {
	// Dir is where data and logs go; a new temporary folder when empty.
	Dir string
	// ReadyTimeout bounds the wait for each component (default 60s). It is a
	// liveness bound for a broken build, not a performance assertion.
	ReadyTimeout time.Duration
}

// Start builds (or takes from the cache) etcd and kube-apiserver and starts
// them on loopback. Call Stop when done.
func Start(ctx context.Context, opt Options) (c *Cluster, err error) {
	if opt.ReadyTimeout == 0 {
		opt.ReadyTimeout = 60 * time.Second
	}
	etcdBin, err := Binary(ctx, "etcd")
	if err != nil {
		return nil, err
	}
	apiBin, err := Binary(ctx, "kube-apiserver")
	if err != nil {
		return nil, err
	}
	dir := opt.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tessera-cluster-"); err != nil {
			return nil, fmt.Errorf("create cluster folder: %w", err)
		}
	}
	c = &Cluster{Dir: dir}
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
	if err := c.startAPIServer(wctx, apiBin, etcdURL, ports[2]); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) startAPIServer(ctx context.Context, bin, etcdURL string, port int) error {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return fmt.Errorf("make admin token: %w", err)
	}
	c.Token = hex.EncodeToString(tok)
	c.Host = "https://127.0.0.1:" + strconv.Itoa(port)
	tokens := filepath.Join(c.Dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(c.Token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	saKey := filepath.Join(c.Dir, "sa.key")
	if err := writeRSAKey(saKey); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, []byte(c.kubeconfig()), 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	var err error
	c.apiserver, err = startProcess("kube-apiserver", bin, c.Dir,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.Dir, "certs"),
		"--token-auth-file="+tokens, "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// A loopback advertise address is refused by the endpoint reconciler,
		// and no test needs the kubernetes Service endpoints.
		"--endpoint-reconciler-type=none",
		// No controller-manager runs: nothing creates service accounts, and
		// nothing would lift the not-ready taints that TaintNodesByCondition
		// puts on new nodes once KWOK reports them Ready.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		"--enable-priority-and-fairness=false", "--profiling=false", "--v=0",
		// As real clusters (kubeadm) do: node agents run privileged.
		"--allow-privileged=true")
	if err != nil {
		return err
	}
	client := c.HTTPClient()
	return c.apiserver.waitFor(ctx, httpOK(client, c.Host+"/readyz", c.Token))
}

// HTTPClient returns a client for Host that skips TLS verification (the
// API server's certificate is self-signed on loopback); add the bearer Token.
func (c *Cluster) HTTPClient() *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
}

func (c *Cluster) kubeconfig() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: tessera-test
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: tessera-test
  context:
    cluster: tessera-test
    user: admin
current-context: tessera-test
`, c.Host, c.Token)
}

// Stop ends every component. The data folder is left for post-mortems;
// tests that pass remove it with RemoveAll.
func (c *Cluster) Stop() {
	if c == nil {
		return
	}
	c.kubeScheduler.stop(5 * time.Second)
	c.kwok.stop(5 * time.Second)
	c.apiserver.stop(10 * time.Second)
	c.etcd.stop(5 * time.Second)
}

// Logs returns the tail of a component's log ("etcd", "kube-apiserver", "kwok").
func (c *Cluster) Logs(name string, lines int) string {
	for _, p := range []*process{c.etcd, c.apiserver, c.kwok, c.kubeScheduler} {
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
