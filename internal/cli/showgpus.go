package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/gpusummary"
	"github.com/tessera-gpu/tessera/inventory"
)

func newShowGPUsCommand(a *app) *cobra.Command {
	var (
		host   hostFlags
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
daemon runs, free capacity is what its jobs leave (live bookings).`,
		Example: `  tessera show-gpus
  tessera show-gpus -a
  tessera show-gpus h100 -o json
  tessera show-gpus --source sim:8xH200
  tessera show-gpus --source sim:4xA100-80GB+2xL4 -o yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			filter := ""
			if len(args) == 1 {
				filter = args[0]
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
			}
			rep, err := gpusummary.Build(a.catalog, srcName, nodes, gpusummary.Options{All: all, Filter: filter})
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
	cmd.Flags().BoolVarP(&all, "all", "a", false, "list every model in the catalog, not only the common ones")
	cmd.Flags().StringVar(&source, "source", "", discovery.SourceHelp+"; default: local when an NVIDIA driver is present, else the catalog only")
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
	fmt.Fprintln(tw, "MODEL\tVENDOR\tMEMORY\tARCHITECTURE\tMIG\tTOTAL\tFREE\tFREE CAPACITY")
	for _, r := range rep.Rows {
		mig := "no"
		if r.MIG {
			mig = "yes"
		}
		total, free, capacity := "-", "-", "-"
		if r.Total != nil {
			total, free = fmt.Sprint(*r.Total), fmt.Sprint(*r.Free)
			capacity = strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", *r.FreeCapacity), "0"), ".")
			if *r.Unhealthy > 0 {
				total += fmt.Sprintf(" (%d unhealthy)", *r.Unhealthy)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Model, r.Vendor, humanMiB(r.MemoryMiB), r.Architecture, mig, total, free, capacity)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if rep.Source != "" {
		fmt.Fprintf(w, "\nInventory: %s\n", rep.Source)
	}
	if !rep.All {
		fmt.Fprintln(w, "Common models shown; use -a for all.")
	}
	return nil
}

// humanMiB renders memory in GiB with one decimal ("140.4 GiB", "80 GiB").
func humanMiB(mib int64) string {
	s := strings.TrimSuffix(fmt.Sprintf("%.1f", float64(mib)/1024), ".0")
	return s + " GiB"
}
