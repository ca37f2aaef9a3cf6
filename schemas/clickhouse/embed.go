// Package clickhouse carries the ClickHouse migrations inside the loomd binary.
// Files are numbered, applied in order, and never edited once merged. A file whose
// first lines say `-- requires: clickhouse >= X.Y` is skipped, and recorded as
// skipped, on an older server.
package clickhouse

import "embed"

// Files holds every NNN_*.sql migration.
//
//go:embed *.sql
var Files embed.FS
