package memrow

import "time"

// SharedUser is the user of a promoted row: (namespace, "-", SharedUser, "-", key) is
// the key's shared-scope row (memory-architecture.md: "the key's promoted row (_shared,
// -, -)"). It is in every user's read scope.
const SharedUser = "_shared"

// Provenance is where a promoted row came from and who promoted it. A promoted row
// carries it in its revision, so every read of the row shows it.
type Provenance struct {
	PromotedBy      string    `json:"promoted_by"`
	PromotedAt      time.Time `json:"promoted_at"`
	Op              string    `json:"op"` // memory.promote or memory.cross_promote
	SourceNamespace string    `json:"source_namespace"`
	SourceAgent     string    `json:"source_agent"`
	SourceUserID    string    `json:"source_user_id"`
	SourceSessionID string    `json:"source_session_id"`
	SourceKey       string    `json:"source_key"`
	SourceMemoryID  string    `json:"source_memory_id"`
	SourceVersion   int64     `json:"source_version"`
}

// SharedIdentity is the shared-scope row of key in namespace ns.
func SharedIdentity(org, ns, key string) Identity {
	return Identity{Org: org, Namespace: ns, Agent: DefaultIdentity, UserID: SharedUser, SessionID: DefaultIdentity, MemoryKey: key}
}

// IsShared reports whether the row is a promoted (shared-scope) row.
func (r *Row) IsShared() bool { return r.UserID == SharedUser }
