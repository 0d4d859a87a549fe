package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/gpusummary"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/clusterinv"
)

func newShowGPUsCommand(a *app) *cobra.Command {
	var (
		host   hostFlags
		kube   kubeFlags
		all    bool
		source string
		output string
	)
	cmd := &cobra.Command{
		Use:   "show-gpus [NAME]",
		Short: "List GPU models with their memory, MIG support and free capacity",
		Long: `List GPU models. Without --all only the common models are shown; a NAME
(case-insensitive; a model, an alias such as "NVIDIA H200", or a family such as
"H100") narrows the list. With an inventory source the table also counts the
GPUs there: total, free (healthy and unallocated) and free fractional capacity.

Without --source, the inventory of a running host daemon (tessera up, found
by --socket / --state-dir) is read, else the local host through NVML when an
NVIDIA driver is present, else only the catalog is shown. Where a host
daemon runs, free capacity is what its jobs leave (live bookings), and a
USED column shows each model's and each GPU's use beside it: busy fraction
of the GPU, measured or simulated (never summed together), or "not
metered" and why.

--source kube reads a Kubernetes cluster running Tessera: the GPUs its
agents publish (GPUNode objects) less what the pods bound to them hold, as
Tessera's scheduler counts them, with a breakdown per node pool (the node
label --pool-label; nodes without it are pooled by GPU model), and a USED
column from the use the agents publish (GPUUse objects: at most one
publication period old; an agent silent for 2 minutes is not metered; each
GPU's in -o json). The
cluster is found as kubectl finds it: --kubeconfig, else $KUBECONFIG (a list
of files, merged), else ~/.kube/config, else the in-cluster service account;
--context picks a context. It needs list on nodes, pods and
gpunodes.tessera.io, and list on gpuuses.tessera.io for the USED column. --source auto reads the cluster when one answers within
2 seconds, else this host, and says on stderr which it used.`,
		Example: `  tessera show-gpus
  tessera show-gpus -a
  tessera show-gpus h100 -o json
  tessera show-gpus --source sim:8xH200
  tessera show-gpus --source sim:4xA100-80GB+2xL4 -o yaml
  tessera show-gpus --source kube --context prod --pool-label cloud.google.com/gke-nodepool`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			filter := ""
			if len(args) == 1 {
				filter = args[0]
			}
			if err := kube.check(cmd, source); err != nil {
				return err
			}
			opt := gpusummary.Options{All: all, Filter: filter}
			switch source {
			case "kube":
				c, err := kube.connect()
				if err != nil {
					return err
				}
				return a.showCluster(cmd.Context(), c, &kube, opt, output)
			case "auto":
				c, err := a.autoCluster(cmd.Context(), &kube)
				var refused *clusterinv.ConfigError
				if errors.As(err, &refused) && (cmd.Flags().Changed("kubeconfig") || cmd.Flags().Changed("context")) {
					// A cluster named by flag that cannot be used is an error, not a fallback.
					return &exitError{code: 1, msg: err.Error()}
				}
				if err == nil {
					fmt.Fprintf(a.stderr, "note: --source auto: reading the Kubernetes cluster (%s)\n", c.Where())
					return a.showCluster(cmd.Context(), c, &kube, opt, output)
				}
				fmt.Fprintf(a.stderr, "note: --source auto: no Kubernetes cluster to read (%v); reading this host\n", err)
			}
			// A running host daemon knows what its jobs hold: without
			// --source, read its inventory; with one, overlay its bookings.
			st, socket, live := a.daemonStatus(cmd.Context(), &host)
			if source == "" && live {
				source = "local"
				if st.Simulated {
					source = st.Source // the daemon's simulated spec: same UUIDs
				}
			}
			srcName, nodes, err := a.readInventory(cmd, source)
			if err != nil {
				return err
			}
			if live && overlayBookings(st, nodes) > 0 {
				fmt.Fprintf(a.stderr, "note: free capacity as booked by the host daemon at %s\n", socket)
				opt.Use = daemonUse(st)
			}
			rep, err := gpusummary.Build(a.catalog, srcName, nodes, opt)
			if err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			if output != formatTable {
				return writeStructured(a.stdout, output, rep)
			}
			return writeGPUTable(a.stdout, rep)
		},
	}
	host.register(cmd)
	kube.register(cmd)
	cmd.Flags().BoolVarP(&all, "all", "a", false, "list every model in the catalog, not only the common ones")
	cmd.Flags().StringVar(&source, "source", "", discovery.SourceHelp+`, "kube" (a Kubernetes cluster running Tessera; auto tries it first); default: a running host daemon, else local when an NVIDIA driver is present, else the catalog only`)
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, json or yaml")
	return cmd
}

// readInventory discovers nodes from source. An empty source means "local if
// available": without a driver it returns no inventory and says so on stderr.
func (a *app) readInventory(cmd *cobra.Command, source string) (string, []inventory.Node, error) {
	explicit := source != ""
	if !explicit {
		source = "local"
	}
	src, err := discovery.Open(source, a.catalog)
	if err != nil {
		return "", nil, err
	}
	nodes, err := src.Discover(cmd.Context())
	if err != nil {
		if !explicit && discovery.IsUnavailable(err) {
			a.log.Debug("no local GPUs", "err", err)
			fmt.Fprintln(a.stderr, "note: no NVIDIA driver found; showing the catalog only (try --source sim:8xH200)")
			return "", nil, nil
		}
		return "", nil, fmt.Errorf("--source %s: %w", source, err)
	}
	if auto, ok := src.(*discovery.Auto); ok && auto.Simulated() {
		fmt.Fprintf(a.stderr, "note: no NVIDIA GPU found; using simulated GPUs (%s)\n", src.Name())
	}
	if nodes == nil {
		nodes = []inventory.Node{}
	}
	return src.Name(), nodes, nil
}

func writeGPUTable(w io.Writer, rep gpusummary.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "MODEL\tVENDOR\tMEMORY\tARCHITECTURE\tMIG\tTOTAL\tFREE\tFREE CAPACITY"
	if rep.WithUse {
		head += "\tUSED"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rep.Rows {
		mig := "no"
		if r.MIG {
			mig = "yes"
		}
		total, free, capacity := "-", "-", "-"
		if r.Total != nil {
			total, free = fmt.Sprint(*r.Total), fmt.Sprint(*r.Free)
			capacity = gpuAmount(*r.FreeCapacity)
			if *r.Unhealthy > 0 {
				total += fmt.Sprintf(" (%d unhealthy)", *r.Unhealthy)
			}
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", r.Model, r.Vendor, humanMiB(r.MemoryMiB), r.Architecture, mig, total, free, capacity)
		if !rep.WithUse {
			fmt.Fprintln(tw, line)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\n", line, useSumWords(r.Use))
		if rep.PoolLabel != "" {
			continue // a cluster: the pool table breaks the use down; -o json lists each GPU's
		}
		for _, g := range r.GPUs { // each GPU's use under its model
			fmt.Fprintf(tw, "  GPU %d\t\t\t\t\t\t\t\t%s\n", g.Index, useWords(g.Use)+memWords(g.Use))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if rep.PoolLabel != "" {
		if err := writePoolTable(w, rep); err != nil {
			return err
		}
	}
	if rep.Source != "" {
		fmt.Fprintf(w, "\nInventory: %s\n", rep.Source)
	}
	if !rep.All {
		fmt.Fprintln(w, "Common models shown; use -a for all.")
	}
	return nil
}

// writePoolTable prints the per-pool breakdown of a cluster's GPUs.
func writePoolTable(w io.Writer, rep gpusummary.Report) error {
	fmt.Fprintf(w, "\nNode pools (label %s; nodes without it are pooled by GPU model):\n", rep.PoolLabel)
	if len(rep.Pools) == 0 {
		fmt.Fprintln(w, "No GPUs found (no node has a GPUNode object).")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "POOL\tMODEL\tNODES\tTOTAL\tFREE\tFREE CAPACITY"
	if rep.WithUse {
		head += "\tUSED"
	}
	fmt.Fprintln(tw, head)
	for _, p := range rep.Pools {
		pool := p.Pool
		if !p.Labeled {
			pool += " (no label)"
		}
		total := fmt.Sprint(p.Total)
		if p.Unhealthy > 0 {
			total += fmt.Sprintf(" (%d unhealthy)", p.Unhealthy)
		}
		line := fmt.Sprintf("%s\t%s\t%d\t%s\t%d\t%s", pool, p.Model, p.Nodes, total, p.Free, gpuAmount(p.FreeCapacity))
		if rep.WithUse {
			line += "\t" + useSumWords(p.Use)
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// gpuAmount renders a capacity in GPUs with at most three decimals ("6.5").
func gpuAmount(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

// humanMiB renders memory in GiB with one decimal ("140.4 GiB", "80 GiB").
func humanMiB(mib int64) string {
	s := strings.TrimSuffix(fmt.Sprintf("%.1f", float64(mib)/1024), ".0")
	return s + " GiB"
}
