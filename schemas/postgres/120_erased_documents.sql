-- Deletion evidence of the knowledge plane (postgres-authority's loom.erased_documents):
-- every version of each document an erasure removed, by source and version and with
-- the version's doc_id, no content. A knowledge commit built from one of them (a write
-- whose expected version, or whose delete or restore's head, an erasure removed) is
-- refused 404, and the Idempotency-Key answers naming one are fenced (internal/erasure's
-- scope of loom.idempotency). Kept LOOM_PG_ERASURE_EVIDENCE_HOURS, as erased_memories.
--
-- Each revision now keeps its doc_id, so the evidence names every version's; the
-- revisions written before name the head's where the version is the head's, and none
-- otherwise (their versions are refused by source and version all the same).
ALTER TABLE loom.knowledge_revisions ADD COLUMN doc_id uuid;
UPDATE loom.knowledge_revisions r SET doc_id = h.doc_id FROM loom.knowledge_heads h
    WHERE h.org = r.org AND h.namespace = r.namespace AND h.source_uri = r.source_uri AND h.version = r.version;

CREATE TABLE loom.erased_documents (
    org        text        NOT NULL,
    namespace  text        NOT NULL,
    source_uri text        NOT NULL,
    version    bigint      NOT NULL,
    doc_id     uuid,
    erasure_id uuid        NOT NULL,
    erased_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, source_uri, version)
);
CREATE INDEX erased_documents_by_doc ON loom.erased_documents (org, namespace, doc_id);
CREATE INDEX erased_documents_by_erasure ON loom.erased_documents (erasure_id);
CREATE INDEX erased_documents_sweep ON loom.erased_documents (erased_at);
