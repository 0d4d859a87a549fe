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
// as jobs.db.damaged-<time>, and never reuses a job ID; it restores a
// record mirror only when its ID, sequence number and state fit its folder.
//
// Open and Recover refuse a state folder another user could change (not
// the daemon user's own, writable by group or others, or under a parent
// another user controls; internal/safefs), open nothing in it through a
// link (jobs.db is checked to be a regular file before and after bbolt
// opens it by name), and remove the temporary files a crash or a full disk
// left in job folders.
//
// The store owns persistence only: it never starts, signals or schedules
// jobs, and it does not decide what a lost job means for its share.
package store
