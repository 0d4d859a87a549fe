// Package webui is Tessera's web dashboard: one page of HTML, CSS and
// JavaScript embedded in the binary (no CDN, nothing fetched at run time;
// charts are inline SVG drawn by the page itself), the JSON it reads and an
// in-process history of samples for its charts.
//
// The UI never decides anything: a Source gives it Snapshots built from the
// same query methods the CLI's API answers from (the host daemon's Status,
// Jobs, Queue and Queues in hostd/server), so the page cannot disagree with
// tessera ps or tessera queue. It is read-only: it serves GET requests only
// and offers no action.
//
// Routes (UI.Register):
//
//	GET /                the page (with a short server-rendered summary for
//	                     clients without JavaScript)
//	GET /ui/static/NAME  the embedded stylesheet and script
//	GET /ui/api/snapshot the current Snapshot as JSON
//	GET /ui/api/history  the chart samples of the last hours (History)
//	GET /ui/api/events   server-sent events: a "snapshot" event at every
//	                     state change the Source reports, and every few
//	                     seconds, so the page updates without reloading
//
// Package webui/termview draws the same Snapshot in a terminal (tessera
// top), read through the same /ui/api/snapshot.
//
// The host daemon serves it behind its API guard (hostd/server); the
// Kubernetes scheduler serves the cluster view (Scope "cluster", with
// Snapshot.Nodes) next to its /metrics, from a Source over the state its
// last scheduling cycle decided from (kube/clusterview). A Source without
// state yet returns an error wrapping ErrNoState.
package webui
