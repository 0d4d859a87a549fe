// Package termsafe makes strings safe to print on a terminal: text that
// came from the host daemon or from a user (a job's command, name, queue,
// folder, reason, an error message of the daemon) is shown with its
// control characters written out visibly, the way kubectl and docker do,
// so that a newline cannot forge a table row and an escape sequence cannot
// retitle, recolour or clear the terminal.
//
// It owns that one rendering (String, and Lines for multi-line messages)
// and nothing else: it must not truncate, pad or otherwise lay text out,
// and it is not for machine-readable output (-o json, -o yaml) or a job's
// own output (tessera logs), which keep their bytes as they are.
package termsafe
