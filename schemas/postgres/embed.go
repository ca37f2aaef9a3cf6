// Package postgres carries the Postgres migrations inside the loomd binary.
// Files are numbered, applied in order, and never edited once merged.
package postgres

import "embed"

// Files holds every NNN_*.sql migration.
//
//go:embed *.sql
var Files embed.FS
