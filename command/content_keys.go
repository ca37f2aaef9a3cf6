package command

import (
	"github.com/loomplane/loom/internal/contentkey"
)

// keyContent gives each row, before the commit's transaction, the content key of its
// scope this process holds (internal/contentkey), so that its keyed content hash is
// computed here rather than by loom.content_hash in plpgsql (the scope's key unwrapped
// and two HMACs a row). A row whose scope's key it does not hold is hashed in SQL, and
// the answered read, queued in the commit's last round trip, fetches that key (made by
// the same commit for a scope's first write) for the writes after.
func (s *Service) keyContent(rows []*pending) *contentkey.Read {
	scopes := make([]contentkey.Scope, len(rows))
	for i, p := range rows {
		scopes[i] = contentkey.Scope{Org: p.row.Org, Namespace: p.row.Namespace, UserRef: p.refs.user}
	}
	keys, missing := s.contentKeys.Cached(scopes)
	for i, p := range rows {
		p.contentKey = keys[scopes[i]]
	}
	return s.contentKeys.Read(missing)
}

// contentHash is the row's keyed content hash computed in Go, bound with the stored
// key it came from (p.contentKey.Stored); "" when the commit holds no key of its
// scope. The head write keeps it only while that key is still the scope's
// (contentHashSQL): an entry cached before an erasure, or before the at-rest pass
// wrapped the key again, is never used against another key.
func (p *pending) contentHash() string {
	if p.contentKey.Stored == nil {
		return ""
	}
	return p.contentKey.Hash(p.row.ContentSHA256)
}

// contentHashSQL is the head write's keyed content hash of the row whose org,
// namespace, user reference and plain digest are the SQL expressions o, ns, u and sha:
// Go's (goHash), bound with the stored key it came from (stored), when that is the
// scope's key as the statement sees it (made earlier in the same commit, for a
// scope's first write, it is not bound); otherwise loom.content_hash's.
func contentHashSQL(o, ns, u, sha, stored, goHash string) string {
	return `CASE WHEN (SELECT k.key FROM loom.content_keys k WHERE k.org = ` + o + ` AND k.namespace = ` + ns + ` AND k.user_id = ` + u + `) = ` + stored +
		` THEN ` + goHash + ` ELSE loom.content_hash(` + o + `, ` + ns + `, ` + u + `, ` + sha + `) END`
}
