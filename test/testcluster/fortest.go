package testcluster

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ForTest starts a control plane for one test (with KWOK when kwok is
// true) and stops it when the test ends, keeping the data folder of a
// failed test for post-mortems. It returns a context that ends with the
// test (bounded, since the first run builds the binaries), the cluster and
// a REST config for clients.
func ForTest(t testing.TB, kwok bool) (context.Context, *Cluster, *rest.Config) {
	t.Helper()
	return ForTestWith(t, kwok, Options{})
}

// ForTestWith is ForTest with options (extra users, an audit policy).
func ForTestWith(t testing.TB, kwok bool, opt Options) (context.Context, *Cluster, *rest.Config) {
	t.Helper()
	// A liveness bound, not a performance one: on a cold 2-core machine the
	// first test waits for kube-apiserver and kubelet to build (about half
	// an hour together), maybe behind another package's build.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	c, err := Start(ctx, opt)
	if err != nil {
		cancel()
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		c.Stop()
		cancel()
		if t.Failed() {
			t.Logf("cluster folder kept at %s", c.Dir)
		} else {
			os.RemoveAll(c.Dir)
		}
	})
	if kwok {
		if err := c.StartKWOK(ctx); err != nil {
			t.Fatalf("start kwok: %v", err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	return ctx, c, cfg
}
