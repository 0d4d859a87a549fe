// Package store persists the host daemon's job records in a bbolt file
// (<state-dir>/jobs.db). Every change is one bbolt transaction, fsynced
// before it returns, so a crash loses no acknowledged job. The file is
// locked by one daemon at a time.
package store
