package nvmlgpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
)

// ErrUnavailable says NVML cannot be used on this machine (no driver library,
// no driver loaded, no permission...). Discover and WatchHealth wrap it.
var ErrUnavailable = errors.New("NVML is not available")

// sourceName is what Discover puts in inventory.Node.Source.
const sourceName = "nvml"

// defaultWaitTimeout bounds one blocking wait for NVML events, and so how long
// WatchHealth may take to notice that its context is done.
const defaultWaitTimeout = time.Second

// Source discovers the local host's NVIDIA GPUs through an nvml.Interface.
// It only reads: it never changes a device setting. A Source is safe for
// concurrent use (NVML counts Init and Shutdown calls).
type Source struct {
	lib         nvml.Interface
	cat         *catalog.Catalog
	hostname    func() (string, error)
	waitTimeout time.Duration
}

// New returns a Source that loads the system's NVML library
// (libnvidia-ml.so.1) when it is used, and resolves product names with cat
// (which may be nil).
func New(cat *catalog.Catalog) *Source { return NewWithInterface(nvml.New(), cat) }

// NewWithInterface returns a Source that uses lib, e.g. a mock from
// github.com/NVIDIA/go-nvml/pkg/nvml/mock in tests.
func NewWithInterface(lib nvml.Interface, cat *catalog.Catalog) *Source {
	return &Source{lib: lib, cat: cat, hostname: os.Hostname, waitTimeout: defaultWaitTimeout}
}

// Name implements discovery.Source.
func (s *Source) Name() string { return "local" }

// Discover implements discovery.Source: it returns one node, this host, with
// every GPU NVML reports and the links between them. Without a usable NVML
// the error wraps ErrUnavailable.
func (s *Source) Discover(ctx context.Context) ([]inventory.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("discover local GPUs: %w", err)
	}
	if err := s.init(); err != nil {
		return nil, fmt.Errorf("discover local GPUs: %w", err)
	}
	defer s.shutdown()
	node, err := s.readNode(ctx)
	if err != nil {
		return nil, fmt.Errorf("discover local GPUs: %w", err)
	}
	return []inventory.Node{node}, nil
}

// init initializes NVML; any failure means NVML is unavailable here.
func (s *Source) init() error {
	if ret := s.lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("%w: nvmlInit: %w", ErrUnavailable, ret)
	}
	return nil
}

// shutdown releases what init took; a failure is only logged, since the
// caller already has (or has failed to get) what it wanted.
func (s *Source) shutdown() {
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		slog.Debug("nvml shutdown failed", "error", ret.Error())
	}
}

// readNode reads the host-wide values, then every device and the topology.
func (s *Source) readNode(ctx context.Context) (inventory.Node, error) {
	node := inventory.Node{Source: sourceName, GPUs: []inventory.GPU{}}
	host, err := s.hostname()
	if err != nil {
		return node, fmt.Errorf("read host name: %w", err)
	}
	node.Name = host

	driver, ret := s.lib.SystemGetDriverVersion()
	switch {
	case ret == nvml.SUCCESS:
		node.DriverVersion = driver
	case !unsupported(ret):
		return node, fmt.Errorf("SystemGetDriverVersion: %w", ret)
	}
	cuda, ret := s.lib.SystemGetCudaDriverVersion()
	switch {
	case ret == nvml.SUCCESS:
		node.CUDAVersion = cudaVersion(cuda)
	case !unsupported(ret):
		return node, fmt.Errorf("SystemGetCudaDriverVersion: %w", ret)
	}

	count, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return node, fmt.Errorf("DeviceGetCount: %w", ret)
	}
	devs := make([]nvml.Device, 0, count)
	for i := range count {
		if err := ctx.Err(); err != nil {
			return node, err
		}
		dev, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return node, callErr(gpuAt(i), "DeviceGetHandleByIndex", ret)
		}
		g, err := s.readGPU(dev, i)
		if err != nil {
			return node, err
		}
		devs = append(devs, dev)
		node.GPUs = append(node.GPUs, g)
	}
	node.Links, err = s.readLinks(ctx, devs, node.GPUs)
	if err != nil {
		return node, err
	}
	return node, nil
}

// cudaVersion formats NVML's CUDA driver version (1000*major + 10*minor,
// e.g. 12080) as "12.8"; 0 or less is unknown ("").
func cudaVersion(v int) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// has reports whether the loaded NVML library exports symbol. go-nvml binds
// symbols lazily, so calling a function the installed driver lacks would
// abort the process; calls newer than the oldest supported driver are
// guarded with has.
func (s *Source) has(symbol string) bool {
	ext := s.lib.Extensions()
	return ext != nil && ext.LookupSymbol(symbol) == nil
}
