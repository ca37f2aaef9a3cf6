package projector

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/tableset"
	"github.com/loomplane/loom/knowledge/store"
)

// The knowledge plane's read models: one documents row per document revision, one
// chunks row per chunk of a revision that wrote content (knowledge/, migration 010).
// user_id is the document's user in the clear, as memory's tables hold it ("" for a
// namespace's document), so a user's erasure fence takes the user's rows.
const (
	columnsDocuments = `org, namespace, user_id, source_uri, doc_id, version, seq, event_type, op, format, title,
		content_type, tags, deleted, chunk_count, bytes, actor, created_at, updated_at`
	columnsDocChunks = `org, namespace, user_id, source_uri, doc_id, version, seq, ordinal, kind, heading_path, text,
		embedding, embedding_dim`
)

// openedDocument is a document revision with its content opened.
type openedDocument struct {
	env     *events.Envelope
	content *events.DocumentContent
}

// writeDocuments opens the batch's document revisions with their keys (read through
// q, under the publishers lock the caller holds) and writes their rows. A revision
// whose key is gone was erased: it projects nothing, as a keyless memory revision.
func (p *Projector) writeDocuments(ctx context.Context, q store.Querier, docs []*events.Envelope) error {
	if len(docs) == 0 {
		return nil
	}
	keys, err := store.FetchKeys(ctx, q, docs)
	if err != nil {
		return err
	}
	var rows []openedDocument
	for _, env := range docs {
		key, ok := keys[env.ID]
		if !ok {
			p.sealed.Inc()
			continue
		}
		c, err := events.OpenDocument(key, env.ID, env.Sealed)
		if err != nil {
			// A damaged record: its content cannot be projected now or on a replay; the
			// namespace's other records go on (the index leaves it out the same way).
			p.log.Error("projector: a document revision's key does not open it; it is not projected", "record", env.ID, "err", err)
			continue
		}
		rows = append(rows, openedDocument{env: env, content: c})
	}
	return insertDocuments(p.ch.Ctx(ctx), p.ch, p.cfg.Tables, rows)
}

func insertDocuments(ctx context.Context, conn *ch.Conn, set tableset.Set, rows []openedDocument) error {
	if len(rows) == 0 {
		return nil
	}
	if err := send(ctx, conn, set.Qualified("documents"), insertInto(set, "documents", columnsDocuments), func(b driver.Batch) error {
		for _, r := range rows {
			d, c := r.env.Document, r.content
			if err := b.Append(r.env.Org, r.env.Namespace, c.UserID, c.SourceURI, d.DocID, uint64(d.Version), uint64(r.env.Seq),
				string(r.env.Type), d.Op, d.Format, c.Title, c.ContentType, nonNil(c.Tags), b2u(d.Deleted), uint32(d.ChunkCount),
				uint64(d.Bytes), d.Actor, seconds(d.CreatedAt), seconds(d.UpdatedAt)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	any := false
	for _, r := range rows {
		any = any || len(r.content.Chunks) > 0
	}
	if !any {
		return nil
	}
	return send(ctx, conn, set.Qualified("chunks"), insertInto(set, "chunks", columnsDocChunks), func(b driver.Batch) error {
		var vec floatCells
		for _, r := range rows {
			d, c := r.env.Document, r.content
			for _, k := range c.Chunks {
				if err := b.Append(r.env.Org, r.env.Namespace, c.UserID, c.SourceURI, d.DocID, uint64(d.Version), uint64(r.env.Seq),
					uint32(k.Ordinal), k.Kind, nonNil(k.HeadingPath), k.Text, vec.of(k.Embedding), uint16(len(k.Embedding))); err != nil {
					return fmt.Errorf("chunk %d of %s: %w", k.Ordinal, r.env.ID, err)
				}
			}
		}
		return nil
	})
}
