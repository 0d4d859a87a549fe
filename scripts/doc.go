// Package scripts holds the repository's shell scripts (demo.sh, the
// README's `make run`) and the tests that run them through the Makefile the
// way a new user does: the demo must show jobs sharing one GPU, exit non-zero
// when a job cannot run, and the build must print no dependency warnings
// while still showing real ones. It has no Go code of its own.
package scripts
