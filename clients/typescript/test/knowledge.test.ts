// The knowledge methods against a real loomd (tests/e2e/tsclient_test.go: the api roles,
// no workers and no model provider), in a namespace of their own.

import assert from "node:assert/strict";
import { test } from "node:test";

import { createLoomClient, ingestionEnded, knowledgeClient, LoomError } from "../src/index.js";

const baseUrl = process.env.LOOM_URL ?? "";
const ns = `${process.env.LOOM_NS ?? ""}-knowledge`;
const knowledge = knowledgeClient(createLoomClient({ baseUrl, token: process.env.LOOM_TOKEN }));
const readers = knowledgeClient(createLoomClient({ baseUrl, token: process.env.LOOM_READER_TOKEN }));

const travel = "# Travel\n\nFlights over six hours are booked in premium economy.\n\n## Receipts\n\nReceipts are filed within thirty days.";

test("a document added, read, outlined, listed, searched, deleted and restored", async () => {
  const added = await knowledge.add(ns, { source_uri: "handbook/travel.md", content: travel, tags: ["policy"] });
  assert.equal(added.source_uri, "handbook/travel.md");
  assert.match(added.version_text, /^\d{19}$/, "a version is nanoseconds, carried exactly as text");
  const again = await knowledge.upsert(ns, { source_uri: "handbook/travel.md", content: travel, tags: ["policy"] });
  assert.equal(again.version_text, added.version_text, "an upsert of the content the head holds writes nothing");
  const [, ticket] = await knowledge.bulkAdd(ns, [
    { source_uri: "handbook/food.md", content: "# Food\n\nThe canteen serves lunch from noon." },
    { source_uri: "tickets/1.txt", content: "The printer jams on duplex jobs." },
  ]);

  const head = await knowledge.get(ns, "handbook/travel.md");
  assert.equal(head.version_text, added.version_text);
  assert.equal(head.format, "markdown");
  const outline = await knowledge.outline(ns, "handbook/travel.md");
  assert.deepEqual(outline.headings.map((h) => h.title), ["Travel", "Receipts"]);
  const listed = await readers.list(ns, { prefix: "handbook/" });
  assert.deepEqual(listed.documents.map((d) => d.source_uri), ["handbook/food.md", "handbook/travel.md"]);

  const found = await readers.search(ns, { query: "premium economy flights", source_prefix: "handbook/" });
  assert.equal(found.hits[0]?.source_uri, "handbook/travel.md", JSON.stringify(found.hits));
  const inspected = await knowledge.inspect(ns);
  assert.equal(inspected.documents, 3);

  const deleted = await knowledge.delete(ns, "tickets/1.txt", ticket!.version_text);
  assert.equal(deleted.deleted, true);
  await assert.rejects(knowledge.get(ns, "tickets/1.txt"), (err: unknown) => err instanceof LoomError && err.status === 404);
  await assert.rejects(knowledge.delete(ns, "handbook/food.md", "7"),
    (err: unknown) => err instanceof LoomError && err.status === 409 && err.code === "PRECONDITION_FAILED");
  const restored = await knowledge.restore(ns, "tickets/1.txt", deleted.version_text);
  assert.equal(restored.deleted, false);
  assert.equal((await knowledge.get(ns, "tickets/1.txt")).source_uri, "tickets/1.txt");
});

test("a table is a dataset: approved at its version, then queried", async () => {
  const csv = "id,city,qty\n1,Oslo,3\n2,Bergen,1\n3,Oslo,5\n";
  const written = await knowledge.add(ns, { source_uri: "tables/orders.csv", content: csv });
  const tables = await knowledge.datasets(ns, "tables/orders.csv");
  assert.equal(tables.datasets[0]?.dataset_id, "table-1");
  assert.ok(!tables.datasets[0]?.approval, "not approved yet");
  await assert.rejects(knowledge.queryDataset(ns, "tables/orders.csv", "table-1", { aggregates: [{ fn: "count" }] }),
    (err: unknown) => err instanceof LoomError && err.status === 409, "a query before the approval");
  const approval = await knowledge.approveDataset(ns, "tables/orders.csv", "table-1", written.version_text);
  assert.equal(BigInt(approval.doc_version).toString().slice(0, 12), written.version_text.slice(0, 12), "the version approved (a double here)");
  const result = await knowledge.queryDataset(ns, "tables/orders.csv", "table-1", {
    filters: [{ column: "city", op: "eq", value: "Oslo" }], aggregates: [{ fn: "count" }, { fn: "sum", column: "qty" }],
  });
  assert.deepEqual(result.columns, ["count", "sum(qty)"]);
  assert.deepEqual(result.rows, [[2, 8]]);
});

test("an ingestion job is submitted, read and cancelled; synthesize without a model is refused", async () => {
  const job = await knowledge.ingest(ns, [{ source_uri: "ingested/a.txt", content: "quokkas live on Rottnest Island" }]);
  assert.equal(job.total, 1);
  const status = await knowledge.ingestStatus(ns, job.ingestion_id);
  assert.equal(status.ingestion_id, job.ingestion_id);
  const cancelled = await knowledge.cancelIngest(ns, job.ingestion_id);
  assert.equal(cancelled.state, "cancelled", "a pending job (no workers run here) ends at once");
  assert.ok(ingestionEnded(await knowledge.ingestStatus(ns, job.ingestion_id)));

  await assert.rejects(knowledge.synthesize(ns, { query: "where do quokkas live" }),
    (err: unknown) => err instanceof LoomError && err.status === 503, "no model provider is configured here");
});
