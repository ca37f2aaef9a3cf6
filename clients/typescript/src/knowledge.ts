// The knowledge plane's operations as named methods, as the Go client has them
// (client/knowledge.go): each a call of the spec's route through the client, its
// request and answer typed by schema.gen.ts, an error answer thrown as a LoomError.

import type { LoomClient } from "./index.js";
import { ok } from "./index.js";
import type { components, paths } from "./schema.gen.js";

type Schemas = components["schemas"];

/** The JSON body a route's method takes, as the spec types it. */
type JsonBody<P extends keyof paths, M extends "post" | "put"> =
  NonNullable<paths[P][M]> extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;

export type DocumentInput = Schemas["DocumentInput"];
export type DocumentWritten = Schemas["DocumentWritten"];
export type KnowledgeSearchRequest = Schemas["KnowledgeSearchRequest"];
export type SynthesizeRequest = JsonBody<"/v1/namespaces/{ns}/knowledge:synthesize", "post">;
/** knowledge.query's grammar: filters, group_by, aggregates, order_by, limit (never SQL). */
export type DatasetQuery = JsonBody<"/v1/namespaces/{ns}/knowledge/datasets:query", "post">["query"];

/**
 * A document version as the answers carry it exactly: `version_text`, or a bigint. A
 * version is the commit's time in nanoseconds, past 2^53, so a JSON number (a double)
 * would not hold it; a number is taken only while it is a safe integer.
 */
export type Version = string | bigint | number;

function digits(v: Version): string {
  const s = typeof v === "number" ? (Number.isSafeInteger(v) ? String(v) : "") : String(v);
  if (!/^\d+$/.test(s)) throw new RangeError(`not an exact version: ${String(v)} (pass the answer's version_text)`);
  return s;
}

// exactVersion serialises a JSON body with field set to v as an integer literal (the
// server reads an int64; JSON.stringify would write a rounded double), or left out.
function exactVersion(field: string, v: Version | undefined) {
  return (body: unknown) => {
    const obj: Record<string, unknown> = { ...(body as object) };
    delete obj[field];
    if (v === undefined) return JSON.stringify(obj);
    const marker = "\u0000version\u0000";
    obj[field] = marker;
    return JSON.stringify(obj).replace(JSON.stringify(marker), digits(v));
  };
}

export interface DocumentListOptions {
  prefix?: string;
  after?: string;
  limit?: number;
  includeDeleted?: boolean;
}

/** A write's options: the Idempotency-Key to send (the client makes one otherwise). */
export interface WriteOptions {
  idempotencyKey?: string;
}

const keyed = (o?: WriteOptions) => (o?.idempotencyKey ? { "Idempotency-Key": o.idempotencyKey } : {});

/**
 * knowledgeClient returns the knowledge operations of a client made by createLoomClient:
 *
 *     const knowledge = knowledgeClient(loom);
 *     await knowledge.add("support", { source_uri: "handbook/travel.md", content: "# Travel\n..." });
 *     const found = await knowledge.search("support", { query: "how do I book travel" });
 */
export function knowledgeClient(loom: LoomClient) {
  const path = (ns: string) => ({ path: { ns } });
  const source = (ns: string, sourceUri: string) => ({ path: { ns }, query: { source_uri: sourceUri } });
  return {
    /** Writes a new version of a source (knowledge.add). */
    add: (ns: string, doc: DocumentInput, o?: WriteOptions) =>
      ok(loom.POST("/v1/namespaces/{ns}/knowledge", { params: path(ns), body: doc, headers: keyed(o) })),
    /** Writes a new version unless the head holds this content already (knowledge.upsert). */
    upsert: (ns: string, doc: DocumentInput, o?: WriteOptions) =>
      ok(loom.PUT("/v1/namespaces/{ns}/knowledge", { params: path(ns), body: doc, headers: keyed(o) })),
    /** Writes documents in one commit (knowledge.bulk_add): all of them or none. */
    bulkAdd: async (ns: string, documents: DocumentInput[], o?: WriteOptions) =>
      (await ok(loom.POST("/v1/namespaces/{ns}/knowledge:bulkAdd", { params: path(ns), body: { documents }, headers: keyed(o) })))
        .documents,
    /** Deletes a source (knowledge.delete); expectedVersion is the head version read. */
    delete: (ns: string, sourceUri: string, expectedVersion?: Version, o?: WriteOptions) => {
      // the query string carries the version's digits exactly
      const expected = expectedVersion === undefined ? undefined : (digits(expectedVersion) as unknown as number);
      return ok(loom.DELETE("/v1/namespaces/{ns}/knowledge/document", {
        params: { path: { ns }, query: { source_uri: sourceUri, expected_version: expected } }, headers: keyed(o),
      }));
    },
    /** Brings a deleted source back (knowledge.restore). */
    restore: (ns: string, sourceUri: string, expectedVersion?: Version, o?: WriteOptions) =>
      ok(loom.POST("/v1/namespaces/{ns}/knowledge/document:restore", {
        params: path(ns), body: { source_uri: sourceUri }, headers: keyed(o),
        bodySerializer: exactVersion("expected_version", expectedVersion),
      })),
    /** Reads a source's head with its content (knowledge.get). */
    get: (ns: string, sourceUri: string, includeDeleted?: boolean) =>
      ok(loom.GET("/v1/namespaces/{ns}/knowledge/document", {
        params: { path: { ns }, query: { source_uri: sourceUri, include_deleted: includeDeleted } },
      })),
    /** Lists a namespace's documents by source URI (knowledge.list). */
    list: (ns: string, o: DocumentListOptions = {}) =>
      ok(loom.GET("/v1/namespaces/{ns}/knowledge", {
        params: { path: { ns }, query: { prefix: o.prefix, after: o.after, limit: o.limit, include_deleted: o.includeDeleted } },
      })),
    /** Reads a document's heading structure (knowledge.outline). */
    outline: (ns: string, sourceUri: string) =>
      ok(loom.GET("/v1/namespaces/{ns}/knowledge/outline", { params: source(ns, sourceUri) })),
    /** Searches a namespace's document chunks (knowledge.search). */
    search: (ns: string, req: KnowledgeSearchRequest) =>
      ok(loom.POST("/v1/namespaces/{ns}/knowledge:search", { params: path(ns), body: req })),
    /** Answers across the namespace's documents with citations, or abstains (knowledge.synthesize). */
    synthesize: (ns: string, req: SynthesizeRequest) =>
      ok(loom.POST("/v1/namespaces/{ns}/knowledge:synthesize", { params: path(ns), body: req })),
    /** Counts a namespace's documents, chunks and owed work (knowledge.inspect). */
    inspect: (ns: string) => ok(loom.GET("/v1/namespaces/{ns}/knowledge/inspect", { params: path(ns) })),
    /** Submits an ingestion job of documents (knowledge.ingest); follow it with ingestStatus. */
    ingest: (ns: string, documents: DocumentInput[], o?: WriteOptions) =>
      ok(loom.POST("/v1/namespaces/{ns}/knowledge/ingestions", { params: path(ns), body: { documents }, headers: keyed(o) })),
    /** Reads an ingestion job (knowledge.ingest_status). */
    ingestStatus: (ns: string, ingestionId: string) =>
      ok(loom.GET("/v1/namespaces/{ns}/knowledge/ingestions/{ingestion_id}", { params: { path: { ns, ingestion_id: ingestionId } } })),
    /** Asks for an ingestion job's cancel (knowledge.ingest_cancel). */
    cancelIngest: (ns: string, ingestionId: string, o?: WriteOptions) =>
      ok(loom.POST("/v1/namespaces/{ns}/knowledge/ingestions/{ingestion_id}:cancel", {
        params: { path: { ns, ingestion_id: ingestionId } }, headers: keyed(o),
      })),
    /** Reads the tables of a source's head as datasets (knowledge.dataset_get). */
    datasets: (ns: string, sourceUri: string) =>
      ok(loom.GET("/v1/namespaces/{ns}/knowledge/datasets", { params: source(ns, sourceUri) })),
    /** Approves a dataset's schema at the document version reviewed (knowledge.dataset_approve). */
    approveDataset: (ns: string, sourceUri: string, datasetId: string, version: Version, o?: WriteOptions) =>
      ok(loom.POST("/v1/namespaces/{ns}/knowledge/datasets:approve", {
        params: path(ns), body: { source_uri: sourceUri, dataset_id: datasetId, version: 0 }, headers: keyed(o),
        bodySerializer: exactVersion("version", version),
      })),
    /** Evaluates a query over an approved dataset at the source's head (knowledge.query). */
    queryDataset: (ns: string, sourceUri: string, datasetId: string, query: DatasetQuery) =>
      ok(loom.POST("/v1/namespaces/{ns}/knowledge/datasets:query", {
        params: path(ns), body: { source_uri: sourceUri, dataset_id: datasetId, query },
      })),
  };
}

export type KnowledgeClient = ReturnType<typeof knowledgeClient>;

/** Whether an ingestion job ended (completed, failed or cancelled). */
export function ingestionEnded(status: Schemas["IngestionStatus"]): boolean {
  return status.state === "completed" || status.state === "failed" || status.state === "cancelled";
}
