// Package cli wires Tessera's subcommands (cobra) to the packages that do
// the work. A command parses and validates its flags, calls one library
// entry point and renders the result; it holds no policy of its own.
package cli
