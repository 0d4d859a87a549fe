package testcluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tessera-gpu/tessera/kube/crd"
	"github.com/tessera-gpu/tessera/test/toolbin"
)

// KueueNamespace is the namespace Kueue runs "in" (its Configuration's
// namespace): StartKueue creates it.
const KueueNamespace = "kueue-system"

// kueueMetricsCerts is where Kueue's manager reads its metrics server's
// certificate when its internal certificate management is off: a fixed
// path in its cmd/kueue/main.go, with no setting to move it.
const kueueMetricsCerts = "/etc/kueue/metrics/certs"

// StartKueue installs Kueue's CRDs (read from the pinned module in the
// module cache, tools/kueue) and starts Kueue's controller manager against
// the cluster: leader election off, internal certificate management off
// (no webhook configurations are installed, so the API server never calls
// its webhooks and its webhook server only needs a self-signed
// certificate), the on-demand visibility API off, the batch/job
// integration only. Jobs must then be created suspended with the
// kueue.x-k8s.io/queue-name label, which is what Kueue's mutating webhook
// would have done. extra is appended to the Configuration (YAML at the top
// level, e.g. a resources: section). Kueue reads its metrics certificate
// from the fixed /etc/kueue/metrics/certs, so StartKueue writes a
// self-signed one there when none is: it needs root for that, and Stop
// removes what it made there. Stop stops Kueue with the rest.
func (c *Cluster) StartKueue(ctx context.Context, extra string) (*Process, error) {
	bin, err := toolbin.Binary(ctx, "kueue")
	if err != nil {
		return nil, err
	}
	// The fixed path's top folder, when this makes it, goes at Stop: a
	// test leaves nothing in /etc (one there already, a real Kueue's, is
	// used and left alone).
	top := filepath.Dir(filepath.Dir(kueueMetricsCerts))
	if _, err := os.Stat(top); errors.Is(err, fs.ErrNotExist) {
		c.mu.Lock()
		c.cleanups = append(c.cleanups, func() { _ = os.RemoveAll(top) })
		c.mu.Unlock()
	}
	if err := ensureCert(kueueMetricsCerts); err != nil {
		return nil, fmt.Errorf("kueue's metrics certificate (a fixed path: run as root): %w", err)
	}
	webhookCerts := filepath.Join(c.Dir, "kueue-webhook-certs")
	if err := ensureCert(webhookCerts); err != nil {
		return nil, fmt.Errorf("kueue's webhook certificate: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	if err := installKueueCRDs(ctx, dyn); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}
	if _, err := core.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", KueueNamespace, err)
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	body := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: 127.0.0.1:%d
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
integrations:
  frameworks:
  - batch/job
%s`, KueueNamespace, ports[0], ports[1], ports[2], webhookCerts, extra)
	cfgPath := filepath.Join(c.Dir, "kueue.yaml")
	if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
		return nil, fmt.Errorf("write kueue config: %w", err)
	}
	p, err := c.StartProcess("kueue", bin, []string{"KUBECONFIG=" + c.Kubeconfig},
		"--config="+cfgPath, "--visibility-server-port="+strconv.Itoa(ports[3]),
		"--feature-gates=VisibilityOnDemand=false", "--zap-log-level=2")
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, c.readyTimeout)
	defer cancel()
	if err := p.p.waitFor(wctx, httpOK(http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(ports[0])+"/readyz", "")); err != nil {
		return nil, err
	}
	return p, nil
}

// KueueCRDDir is the folder of Kueue's CRD manifests in the module cache,
// for the Kueue that tools/kueue pins (downloaded when missing).
func KueueCRDDir(ctx context.Context) (string, error) {
	dir, err := kueueModuleDir(ctx, toolbin.Pinned("kueue"))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config", "components", "crd", "bases"), nil
}

// JobSetCRDFile is JobSet's CRD manifest (jobset.x-k8s.io) in the module
// cache, for the JobSet that tools/kueue's Kueue is built against
// (downloaded when missing).
func JobSetCRDFile(ctx context.Context) (string, error) {
	dir, err := kueueModuleDir(ctx, "sigs.k8s.io/jobset")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml"), nil
}

// kueueModuleDir is the module cache folder of module at the version
// tools/kueue's build list has (downloaded when missing).
func kueueModuleDir(ctx context.Context, module string) (string, error) {
	root, err := toolbin.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = filepath.Join(root, toolbin.KueueModule)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("find %s in the module cache (go mod download in %s): %w", module, toolbin.KueueModule, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("read go mod download's answer: %w", err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("download %s: %q", module, mod.Error)
	}
	return mod.Dir, nil
}

func installKueueCRDs(ctx context.Context, dyn dynamic.Interface) error {
	dir, err := KueueCRDDir(ctx)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no Kueue CRDs in %s (%v)", dir, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read Kueue CRD: %w", err)
		}
		if err := crd.Install(ctx, dyn, data); err != nil {
			return fmt.Errorf("install %s: %w", filepath.Base(f), err)
		}
	}
	return nil
}

// ensureCert writes a self-signed certificate for 127.0.0.1 and localhost
// (tls.crt, tls.key) into dir unless one is there already.
func ensureCert(dir string) error {
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if _, err := os.Stat(crt); err == nil {
		if _, err := os.Stat(key); err == nil {
			return nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return fmt.Errorf("self-sign: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("encode key: %w", err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	if err := os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("write certificate: %w", err)
	}
	return nil
}
