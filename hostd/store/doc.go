// Package store persists the host daemon's job records in a bbolt file
// (<state-dir>/jobs.db). Every change is one bbolt transaction, fsynced
// before it returns, so a crash loses no acknowledged job. The file is
// locked by one daemon at a time.
//
// Each record is mirrored to jobs/<id>/record.json (written atomically
// after the transaction), so the database and the job folders can be
// checked against each other. Open refuses, with ErrDamaged and a message
// naming the file, a database that fails bbolt's consistency check, whose
// meta pages are damaged, that is missing or empty beside job folders, or
// that was rolled back to fewer jobs than the folders hold. Recover
// rebuilds a refused state folder from what survives (record mirrors,
// salvaged records, spec.json and exit.json), keeps the damaged file aside
// as jobs.db.damaged-<time>, and never reuses a job ID.
//
// The store owns persistence only: it never starts, signals or schedules
// jobs, and it does not decide what a lost job means for its share.
package store
