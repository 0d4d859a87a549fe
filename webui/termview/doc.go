// Package termview is the dashboard's overview in a terminal (tessera top):
// it turns one webui.Snapshot, the JSON the web page reads from
// /ui/api/snapshot, into a screen of text of a given size, and drives the
// refreshing full-screen view (Model, a bubbletea program).
//
// It owns the terminal layout only: the header (host, GPUs, running and
// waiting jobs, time), the totals, the notes, one row per GPU (guaranteed
// compute, burst limit, measured grant, memory booked, with bars), the job
// table (live jobs first, newest first, as the page lists them; sorted and
// filtered on request), and fitting all that to the terminal's width and
// height ("+N more").
//
// It must not compute a figure the snapshot carries in another way, nor
// read the daemon's state by any other path: every number comes from the
// Snapshot, so the terminal and the web page cannot disagree. Render is
// pure (no I/O, no clock: the caller passes the time); Model fetches
// through the function it is given and does nothing else. Strings from
// the daemon are shown as text: control characters (and so terminal
// escape sequences) are written out as escapes ("\x1b", "\n", by
// internal/termsafe, as tessera ps does), never sent to the terminal.
package termview
