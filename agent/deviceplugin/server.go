package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Handler does the plugin's work; the Server only speaks the protocol.
type Handler interface {
	// Preferred returns size device IDs from available (including
	// mustInclude) for the next container, or nil to let kubelet choose.
	// kubelet holds its device manager lock during this call: it must be
	// quick and must not call kubelet's PodResources API.
	Preferred(ctx context.Context, available, mustInclude []string, size int) []string
	// Allocate returns what the container that got deviceIDs needs.
	Allocate(ctx context.Context, deviceIDs []string) (*pluginapi.ContainerAllocateResponse, error)
	// PreStart runs before each start of a container that holds deviceIDs.
	PreStart(ctx context.Context, deviceIDs []string) error
}

// Config configures a Server.
type Config struct {
	// ResourceName is the extended resource, e.g. "tessera.io/gpu".
	ResourceName string
	// PluginDir is kubelet's device-plugins folder (kubelet.sock lives there).
	PluginDir string
	// SocketName is the plugin's socket file name in PluginDir.
	SocketName string
	Handler    Handler
	Log        *slog.Logger
	// CheckInterval is how often the server looks for a kubelet restart
	// (default 1s).
	CheckInterval time.Duration
	// RegisterTimeout bounds one registration attempt (default 10s).
	RegisterTimeout time.Duration
}

// Server is a running device plugin.
type Server struct {
	pluginapi.UnimplementedDevicePluginServer
	cfg Config

	mu      sync.Mutex
	devices []*pluginapi.Device
	changed chan struct{} // closed and replaced when devices change

	registered chan struct{} // receives after every successful registration
}

// New checks cfg and returns a Server; Run starts it.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.ResourceName == "":
		return nil, errors.New("device plugin: resource name must be set")
	case cfg.PluginDir == "" || !filepath.IsAbs(cfg.PluginDir):
		return nil, fmt.Errorf("device plugin: plugin dir must be an absolute path, got %q", cfg.PluginDir)
	case cfg.SocketName == "" || filepath.Base(cfg.SocketName) != cfg.SocketName:
		return nil, fmt.Errorf("device plugin: socket name must be a plain file name, got %q", cfg.SocketName)
	case cfg.Handler == nil:
		return nil, errors.New("device plugin: handler must be set")
	}
	if n := len(filepath.Join(cfg.PluginDir, cfg.SocketName)); n > 107 {
		return nil, fmt.Errorf("device plugin: socket path %s is %d bytes; unix sockets allow at most 107", filepath.Join(cfg.PluginDir, cfg.SocketName), n)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = time.Second
	}
	if cfg.RegisterTimeout <= 0 {
		cfg.RegisterTimeout = 10 * time.Second
	}
	return &Server{cfg: cfg, changed: make(chan struct{}), registered: make(chan struct{}, 1)}, nil
}

// SetDevices replaces the device list and sends it to every ListAndWatch stream.
func (s *Server) SetDevices(devs []*pluginapi.Device) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devices = devs
	close(s.changed)
	s.changed = make(chan struct{})
}

// Registered receives (without blocking the server) after each successful
// registration with kubelet; for tests and readiness.
func (s *Server) Registered() <-chan struct{} { return s.registered }

func (s *Server) snapshot() ([]*pluginapi.Device, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.devices, s.changed
}

func (s *Server) socketPath() string { return filepath.Join(s.cfg.PluginDir, s.cfg.SocketName) }
func (s *Server) kubeletPath() string {
	return filepath.Join(s.cfg.PluginDir, filepath.Base(pluginapi.KubeletSocket))
}

// Run serves the plugin and keeps it registered until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	for {
		if err := s.serveOnce(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		s.cfg.Log.Info("kubelet restarted or plugin socket removed; serving and registering again", "resource", s.cfg.ResourceName)
	}
}

// serveOnce serves on a fresh socket, registers, and returns when kubelet
// restarted (to be called again) or ctx is done.
func (s *Server) serveOnce(ctx context.Context) error {
	path := s.socketPath()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("device plugin: remove stale socket: %w", err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("device plugin: listen on %s: %w", path, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil {
			s.cfg.Log.Warn("device plugin server stopped", "error", err)
		}
	}()
	defer func() {
		srv.Stop()
		<-done
	}()
	own, err := inode(path)
	if err != nil {
		return fmt.Errorf("device plugin: stat own socket: %w", err)
	}
	kubelet, err := s.registerUntilDone(ctx)
	if err != nil || kubelet == 0 {
		return err
	}
	t := time.NewTicker(s.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if cur, err := inode(path); err != nil || cur != own {
				return nil
			}
			if cur, err := inode(s.kubeletPath()); err == nil && cur != kubelet {
				return nil
			}
		}
	}
}

// registerUntilDone registers with kubelet, retrying while kubelet is away.
// It returns the inode of the kubelet socket it registered through, or 0
// when ctx ended first.
func (s *Server) registerUntilDone(ctx context.Context) (uint64, error) {
	for {
		ino, err := inode(s.kubeletPath())
		if err == nil {
			if err = s.register(ctx); err == nil {
				s.cfg.Log.Info("registered with kubelet", "resource", s.cfg.ResourceName, "socket", s.socketPath())
				select {
				case s.registered <- struct{}{}:
				default:
				}
				return ino, nil
			}
		}
		s.cfg.Log.Warn("cannot register with kubelet yet; retrying", "error", err)
		select {
		case <-ctx.Done():
			return 0, nil
		case <-time.After(s.cfg.CheckInterval):
		}
	}
}

func (s *Server) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RegisterTimeout)
	defer cancel()
	conn, err := Dial(s.kubeletPath())
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     s.cfg.SocketName,
		ResourceName: s.cfg.ResourceName,
		Options:      options(),
	})
	if err != nil {
		return fmt.Errorf("register %s with kubelet: %w", s.cfg.ResourceName, err)
	}
	return nil
}

func options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{PreStartRequired: true, GetPreferredAllocationAvailable: true}
}

// GetDevicePluginOptions implements the device plugin API.
func (s *Server) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return options(), nil
}

// ListAndWatch sends the device list now and after every change.
func (s *Server) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		devs, changed := s.snapshot()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return fmt.Errorf("send device list: %w", err)
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-changed:
		}
	}
}

// GetPreferredAllocation implements the device plugin API.
func (s *Server) GetPreferredAllocation(ctx context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, r := range req.ContainerRequests {
		ids := s.cfg.Handler.Preferred(ctx, r.AvailableDeviceIDs, r.MustIncludeDeviceIDs, int(r.AllocationSize))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate implements the device plugin API.
func (s *Server) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, r := range req.ContainerRequests {
		cr, err := s.cfg.Handler.Allocate(ctx, r.DevicesIds)
		if err != nil {
			s.cfg.Log.Warn("allocate failed", "devices", r.DevicesIds, "error", err)
			return nil, status.Error(codes.FailedPrecondition, "tessera: "+err.Error())
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cr)
	}
	return resp, nil
}

// PreStartContainer implements the device plugin API.
func (s *Server) PreStartContainer(ctx context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	if err := s.cfg.Handler.PreStart(ctx, req.DevicesIds); err != nil {
		s.cfg.Log.Warn("pre-start check failed", "devices", req.DevicesIds, "error", err)
		return nil, status.Error(codes.FailedPrecondition, "tessera: "+err.Error())
	}
	return &pluginapi.PreStartContainerResponse{}, nil
}
