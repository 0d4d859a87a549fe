package kubeletsim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Kubelet is the stand-in. Create it with Start.
type Kubelet struct {
	pluginDir, podResourcesSocket, resource string

	// admitMu serialises admissions, as kubelet's sync loop does.
	admitMu sync.Mutex
	// devLock is the device manager lock: held while choosing devices and
	// during GetPreferredAllocation, not during Allocate.
	devLock    sync.Mutex
	lockHeld   bool // guarded by stateMu; true while devLock is held
	stateMu    sync.Mutex
	devices    map[string]string // ID -> health, from ListAndWatch
	devicesCh  chan struct{}     // closed and replaced on every device update
	plugin     *plugin
	registered int
	active     map[string]Pod                    // pod key -> pod (kubelet's active pods)
	order      []string                          // admission order of active pods
	podDevices map[string]map[string]*Allocation // pod key -> container -> allocation
	inUse      map[string]string                 // device ID -> pod key
	// starting is set from RestartStarting until Synced: the PodResources
	// API lists no pod.
	starting bool

	servers []*grpc.Server
	wg      sync.WaitGroup
}

type plugin struct {
	conn   *grpc.ClientConn
	client pluginapi.DevicePluginClient
	opts   *pluginapi.DevicePluginOptions
	cancel context.CancelFunc
}

// Start serves kubelet.sock in pluginDir and the PodResources API on
// podResourcesSocket, for one resource name.
func Start(pluginDir, podResourcesSocket, resource string) (*Kubelet, error) {
	k := &Kubelet{
		pluginDir: pluginDir, podResourcesSocket: podResourcesSocket, resource: resource,
		devices: map[string]string{}, devicesCh: make(chan struct{}),
		active: map[string]Pod{}, podDevices: map[string]map[string]*Allocation{}, inUse: map[string]string{},
	}
	if err := k.serve(); err != nil {
		k.Stop()
		return nil, err
	}
	return k, nil
}

func (k *Kubelet) serve() error {
	if err := os.MkdirAll(k.pluginDir, 0o755); err != nil {
		return err
	}
	reg := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(reg, registration{k: k})
	if err := k.listen(reg, filepath.Join(k.pluginDir, filepath.Base(pluginapi.KubeletSocket))); err != nil {
		return err
	}
	pr := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(pr, podResources{k: k})
	return k.listen(pr, k.podResourcesSocket)
}

func (k *Kubelet) listen(s *grpc.Server, path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("kubeletsim: listen %s: %w", path, err)
	}
	k.servers = append(k.servers, s)
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		_ = s.Serve(lis)
	}()
	return nil
}

// Stop ends the servers and the plugin connection.
func (k *Kubelet) Stop() {
	for _, s := range k.servers {
		s.Stop()
	}
	k.wg.Wait()
	k.servers = nil
	k.stateMu.Lock()
	p := k.plugin
	k.plugin = nil
	k.stateMu.Unlock()
	if p != nil {
		p.cancel()
		p.conn.Close()
	}
}

// Restart stops, deletes every socket in the plugin folder as kubelet
// does on start, and serves again. Allocations and active pods survive
// (kubelet's checkpoint); the device list is empty until a plugin registers.
func (k *Kubelet) Restart() error {
	k.Stop()
	entries, err := os.ReadDir(k.pluginDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(k.pluginDir, e.Name())); err != nil {
			return err
		}
	}
	k.stateMu.Lock()
	k.devices = map[string]string{}
	k.notifyLocked()
	k.stateMu.Unlock()
	return k.serve()
}

// RestartStarting restarts as Restart does, and keeps the stand-in where a
// real kubelet is just after it starts: its PodResources API answers, but
// lists no pod until Synced, since kubelet serves it before its pod manager
// has re-added the pods it runs (they come from the API server after
// start). Allocations survive as with Restart.
func (k *Kubelet) RestartStarting() error {
	k.stateMu.Lock()
	k.starting = true
	k.stateMu.Unlock()
	return k.Restart()
}

// Synced ends what RestartStarting began: the PodResources API lists every
// active pod again.
func (k *Kubelet) Synced() {
	k.stateMu.Lock()
	defer k.stateMu.Unlock()
	k.starting = false
}

// Registrations counts successful plugin registrations.
func (k *Kubelet) Registrations() int {
	k.stateMu.Lock()
	defer k.stateMu.Unlock()
	return k.registered
}

// Devices returns the plugin's devices and their health.
func (k *Kubelet) Devices() map[string]string {
	k.stateMu.Lock()
	defer k.stateMu.Unlock()
	out := make(map[string]string, len(k.devices))
	for id, h := range k.devices {
		out[id] = h
	}
	return out
}

// WaitDevices waits until ok accepts the device list or ctx ends.
func (k *Kubelet) WaitDevices(ctx context.Context, ok func(map[string]string) bool) error {
	for {
		k.stateMu.Lock()
		ch := k.devicesCh
		k.stateMu.Unlock()
		if ok(k.Devices()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubeletsim: waiting for devices: %w (have %d)", ctx.Err(), len(k.Devices()))
		case <-ch:
		}
	}
}

func (k *Kubelet) notifyLocked() {
	close(k.devicesCh)
	k.devicesCh = make(chan struct{})
}

// connect dials a registering plugin and follows its device stream.
func (k *Kubelet) connect(endpoint string) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.pluginDir, endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	client := pluginapi.NewDevicePluginClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	opts, err := client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		cancel()
		conn.Close()
		return fmt.Errorf("kubeletsim: plugin options: %w", err)
	}
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		cancel()
		conn.Close()
		return fmt.Errorf("kubeletsim: ListAndWatch: %w", err)
	}
	k.stateMu.Lock()
	old := k.plugin
	k.plugin = &plugin{conn: conn, client: client, opts: opts, cancel: cancel}
	k.registered++
	k.stateMu.Unlock()
	if old != nil {
		old.cancel()
		old.conn.Close()
	}
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			k.stateMu.Lock()
			k.devices = map[string]string{}
			for _, d := range resp.Devices {
				k.devices[d.ID] = d.Health
			}
			k.notifyLocked()
			k.stateMu.Unlock()
		}
	}()
	return nil
}

func (k *Kubelet) currentPlugin() (*plugin, error) {
	k.stateMu.Lock()
	defer k.stateMu.Unlock()
	if k.plugin == nil {
		return nil, fmt.Errorf("kubeletsim: no plugin registered for %s", k.resource)
	}
	return k.plugin, nil
}

// free lists healthy devices no container holds, sorted.
func (k *Kubelet) freeLocked() []string {
	var out []string
	for id, h := range k.devices {
		if h == pluginapi.Healthy && k.inUse[id] == "" {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

type registration struct {
	pluginapi.UnimplementedRegistrationServer
	k *Kubelet
}

func (r registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("kubeletsim: unsupported version %q", req.Version)
	}
	if req.ResourceName != r.k.resource {
		return nil, fmt.Errorf("kubeletsim: unexpected resource %q", req.ResourceName)
	}
	if err := r.k.connect(req.Endpoint); err != nil {
		return nil, err
	}
	return &pluginapi.Empty{}, nil
}
