package projector

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/tableset"
)

// A copy writer (a pin, a status mark, a supersession) commits a new version of a
// head with its text unchanged and no vector: Postgres stores none. Its search
// document must still be replaced, since search filters on the state it changes, so
// the projector carries the vector of the document that holds the same content:
// an earlier revision of the key in the same batch, else the current document in
// ClickHouse. A copy whose content ClickHouse no longer holds gets no vector.

type identity struct{ org, namespace, agent, userID, sessionID, key string }

func identityOf(o opened) identity {
	r := o.env.Revision
	return identity{o.env.Org, o.env.Namespace, r.Agent, r.UserID, r.SessionID, o.content.MemoryKey}
}

func needsCarry(o opened) bool {
	return len(o.content.Embedding) == 0 && o.env.Revision.EmbeddingDim > 0 && !o.env.Revision.Tombstone
}

// carryVectors finds the vectors of the batch's copies, from the documents of set: the
// content each copy of rows (by index) takes, and how many it could not find. The
// documents kept from earlier batches (keptDocs) stand for set's where they are kept.
// rows and kept are only read, so the batch's other reads may run beside it.
func carryVectors(ctx context.Context, conn *ch.Conn, set tableset.Set, rows []opened, kept map[nsKey]*keptSpace) (map[int]*events.Content, int, error) {
	type doc = storedDoc
	latest := map[identity]doc{}
	want := map[identity]bool{}
	for _, o := range rows {
		id := identityOf(o)
		switch {
		case len(o.content.Embedding) > 0:
			latest[id] = doc{o.env.Revision.ContentSHA256, o.content.Embedding, o.content.KeyEmbedding}
		case needsCarry(o):
			if d, ok := latest[id]; !ok || d.sha != o.env.Revision.ContentSHA256 {
				if _, known := keptDoc(kept, id); !known {
					want[id] = true
				}
			}
		}
	}
	stored, err := readDocs(ctx, conn, set, want)
	if err != nil {
		return nil, 0, err
	}
	carried := map[int]*events.Content{}
	missing := 0
	for i, o := range rows {
		id := identityOf(o)
		if len(o.content.Embedding) > 0 {
			latest[id] = doc{o.env.Revision.ContentSHA256, o.content.Embedding, o.content.KeyEmbedding}
			continue
		}
		if !needsCarry(o) {
			continue
		}
		d, ok := latest[id]
		if !ok || d.sha != o.env.Revision.ContentSHA256 {
			if d, ok = keptDoc(kept, id); !ok {
				d, ok = stored[id]
			}
		}
		if !ok || d.sha != o.env.Revision.ContentSHA256 || len(d.vector) == 0 {
			missing++
			continue
		}
		c := *o.content
		c.Embedding, c.KeyEmbedding = d.vector, d.keyVe
		carried[i] = &c
	}
	return carried, missing, nil
}

type storedDoc = struct {
	sha           string
	vector, keyVe []float32
}

// readDocs reads the current search documents of the given keys in set, one statement
// per namespace.
func readDocs(ctx context.Context, conn *ch.Conn, set tableset.Set, want map[identity]bool) (map[identity]storedDoc, error) {
	out := map[identity]storedDoc{}
	byNS := map[[2]string][]identity{}
	for id := range want {
		k := [2]string{id.org, id.namespace}
		byNS[k] = append(byNS[k], id)
	}
	for ns, ids := range byNS {
		var conds []string
		args := []any{ns[0], ns[1]}
		for _, id := range ids {
			conds = append(conds, "(agent = ? AND user_id = ? AND session_id = ? AND memory_key = ?)")
			args = append(args, id.agent, id.userID, id.sessionID, id.key)
		}
		q := fmt.Sprintf(`SELECT agent, user_id, session_id, memory_key, content_sha256, embedding, key_embedding
			FROM %s FINAL PREWHERE org = ? AND namespace = ? WHERE %s`, set.Qualified("memory_embeddings"), strings.Join(conds, " OR "))
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("read the documents copies carry: %w", err)
		}
		for rows.Next() {
			id := identity{org: ns[0], namespace: ns[1]}
			var d storedDoc
			if err := rows.Scan(&id.agent, &id.userID, &id.sessionID, &id.key, &d.sha, &d.vector, &d.keyVe); err != nil {
				rows.Close()
				return nil, err
			}
			if len(d.vector) > 0 {
				out[id] = d
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
