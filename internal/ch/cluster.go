package ch

import (
	"fmt"
	"regexp"
	"strings"
)

// The oldest server cluster mode runs on: it relies on ClickHouse Keeper and on
// insert_quorum = 'auto'.
const (
	MinClusterMajor = 22
	MinClusterMinor = 8
)

var (
	createDatabase = regexp.MustCompile(`(?is)^\s*CREATE\s+DATABASE\s+(IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*$`)
	// DDL whose table name is followed by ON CLUSTER: CREATE, ALTER and DROP TABLE.
	tableDDL  = regexp.MustCompile(`(?is)^(\s*(?:CREATE\s+TABLE(?:\s+IF\s+NOT\s+EXISTS)?|ALTER\s+TABLE|DROP\s+TABLE(?:\s+IF\s+EXISTS)?)\s+)([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)`)
	mergeTree = regexp.MustCompile(`(?is)ENGINE\s*=\s*([A-Za-z]*)MergeTree(\s*\(([^()]*)\))?`)
	onCluster = regexp.MustCompile(`(?i)\sON\s+CLUSTER\s`)
)

// ClusterDDL rewrites one migration statement written for a single server into its
// cluster form: CREATE DATABASE, CREATE/ALTER/DROP TABLE run ON CLUSTER, and a
// *MergeTree engine becomes its Replicated form, replicated through Keeper under
// /clickhouse/tables/{shard}/<database>/<table> with the server's {replica} macro.
// Migrations stay written once, in the portable single-server subset; this is the
// only place that knows the cluster's shape. Other statements pass through.
func ClusterDDL(stmt, cluster string) string {
	if cluster == "" || onCluster.MatchString(stmt) {
		return stmt
	}
	on := " ON CLUSTER " + quoteString(cluster)
	if m := createDatabase.FindStringSubmatch(stmt); m != nil {
		return strings.TrimRight(stmt, " \t\n") + on
	}
	m := tableDDL.FindStringSubmatchIndex(stmt)
	if m == nil {
		return stmt
	}
	database, table := stmt[m[4]:m[5]], stmt[m[6]:m[7]]
	out := stmt[:m[7]] + on + stmt[m[7]:]
	return mergeTree.ReplaceAllStringFunc(out, func(engine string) string {
		p := mergeTree.FindStringSubmatch(engine)
		if strings.HasPrefix(strings.ToLower(p[1]), "replicated") {
			return engine
		}
		args := []string{quoteString(fmt.Sprintf("/clickhouse/tables/{shard}/%s/%s", database, table)), quoteString("{replica}")}
		if a := strings.TrimSpace(p[3]); a != "" {
			args = append(args, a)
		}
		return "ENGINE = Replicated" + p[1] + "MergeTree(" + strings.Join(args, ", ") + ")"
	})
}

func quoteString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
