package ch

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Capabilities is what the server can do beyond the portable subset. Loom switches to
// a faster form only where it is equivalent to the portable one.
type Capabilities struct {
	Version        string
	Major, Minor   int
	CosineDistance bool // cosineDistance / dotProduct, instead of arraySum(arrayMap(...))
	AsyncInsert    bool // the async_insert setting exists (and must be sent as 0)
}

// AtLeast reports whether the server is version major.minor or newer.
func (c Capabilities) AtLeast(major, minor int) bool {
	return c.Major > major || (c.Major == major && c.Minor >= minor)
}

// Probe asks the server once for its version, functions and settings.
func Probe(ctx context.Context, conn driver.Conn) (Capabilities, error) {
	var caps Capabilities
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&caps.Version); err != nil {
		return caps, fmt.Errorf("probe ClickHouse version: %w", err)
	}
	caps.Major, caps.Minor = parseVersion(caps.Version)
	names, err := strings1(ctx, conn, "SELECT name FROM system.functions WHERE name IN ('cosineDistance', 'dotProduct')")
	if err != nil {
		return caps, fmt.Errorf("probe ClickHouse functions: %w", err)
	}
	caps.CosineDistance = names["cosineDistance"] && names["dotProduct"]
	settings, err := strings1(ctx, conn, "SELECT name FROM system.settings WHERE name = 'async_insert'")
	if err != nil {
		return caps, fmt.Errorf("probe ClickHouse settings: %w", err)
	}
	caps.AsyncInsert = settings["async_insert"]
	return caps, nil
}

func parseVersion(v string) (major, minor int) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) >= 2 {
		major, _ = strconv.Atoi(parts[0])
		minor, _ = strconv.Atoi(parts[1])
	}
	return major, minor
}

func strings1(ctx context.Context, conn driver.Conn, q string) (map[string]bool, error) {
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out[s] = true
	}
	return out, rows.Err()
}

// Dot is the SQL of the dot product of an Array(Float32) column with a bound vector
// (one `?` placeholder). Vectors are stored normalised, so it is their cosine. The
// portable form returns Float64 on 18.16, as does dotProduct: scan into float64.
func (c Capabilities) Dot(column string) string {
	if c.CosineDistance {
		return "dotProduct(" + column + ", ?)"
	}
	return "arraySum(arrayMap((x, y) -> x * y, " + column + ", ?))"
}
