package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	kdra "github.com/tessera-gpu/tessera/kube/dra"
)

// Kubelet's folders for DRA drivers (its defaults).
const (
	// DefaultPluginDir is the driver's folder for its DRA socket.
	DefaultPluginDir = kubeletplugin.KubeletPluginsDir + "/" + kdra.DriverName
	// DefaultRegistryDir is where kubelet looks for plugins' registration
	// sockets.
	DefaultRegistryDir = kubeletplugin.KubeletRegistryDir
)

// ServeOptions say where kubelet finds the plugin.
type ServeOptions struct {
	// Client reads the claims kubelet names (get on resourceclaims).
	Client kubernetes.Interface
	// NodeName is this node's name.
	NodeName string
	// PluginDir holds the DRA socket (DefaultPluginDir); it is created
	// when missing. RegistryDir is kubelet's plugin registration folder
	// (DefaultRegistryDir), which must exist. Both absolute, and the same
	// paths inside and outside the agent's container.
	PluginDir, RegistryDir string
}

// Serve registers the plugin with kubelet and serves kubelet's prepare
// and unprepare calls (through the kubeletplugin helper) until ctx ends or
// the helper reports a fatal error. The plugin serves no device health:
// unhealthy GPUs are tainted in the ResourceSlices.
func (p *Plugin) Serve(ctx context.Context, o ServeOptions) error {
	switch {
	case o.Client == nil:
		return errors.New("DRA kubelet plugin: a Kubernetes client must be set")
	case o.NodeName == "":
		return errors.New("DRA kubelet plugin: node name must be set")
	case !filepath.IsAbs(o.PluginDir):
		return fmt.Errorf("DRA kubelet plugin: plugin dir: must be an absolute path, got %q", o.PluginDir)
	case !filepath.IsAbs(o.RegistryDir):
		return fmt.Errorf("DRA kubelet plugin: registry dir: must be an absolute path, got %q", o.RegistryDir)
	}
	if err := os.MkdirAll(o.PluginDir, 0o750); err != nil {
		return fmt.Errorf("DRA kubelet plugin: plugin dir: %w", err)
	}
	if fi, err := os.Stat(o.RegistryDir); err != nil {
		return fmt.Errorf("DRA kubelet plugin: registry dir: must be kubelet's existing plugin registration folder: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("DRA kubelet plugin: registry dir %s: must be kubelet's plugin registration folder, not a file", o.RegistryDir)
	}
	h, err := kubeletplugin.Start(ctx, p,
		kubeletplugin.DriverName(kdra.DriverName),
		kubeletplugin.KubeClient(o.Client),
		kubeletplugin.NodeName(o.NodeName),
		kubeletplugin.PluginDataDirectoryPath(o.PluginDir),
		kubeletplugin.RegistrarDirectoryPath(o.RegistryDir),
		kubeletplugin.HealthService(false),
	)
	if err != nil {
		return fmt.Errorf("DRA kubelet plugin: %w", err)
	}
	defer h.Stop()
	p.cfg.Log.Info("serving the DRA kubelet plugin", "driver", kdra.DriverName, "pluginDir", o.PluginDir, "registryDir", o.RegistryDir)
	select {
	case <-ctx.Done():
		return nil
	case err := <-p.fatal:
		return fmt.Errorf("DRA kubelet plugin: %w", err)
	}
}
