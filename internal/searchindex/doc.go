// Package searchindex is the in-process search index: one more projection of the
// revisions topic, held in memory per (org, namespace), holding what search's vector,
// chunk, lexical and key legs and memory.set's peer read need. It is pure code: no I/O,
// no Kafka, no Postgres; internal/indexfeed feeds it from the topic.
//
// # What it holds
//
// Per identity (agent, user_id, session_id, memory_key) the served document, as
// memory_embeddings/memory_lexical/memory_chunks FINAL hold it: memory_id, version, seq,
// memory_type, status, tombstone, sensitivity, pinned, content_sha256, tags, expires_at,
// valid_to, updated_at (to the second), the value vector and the chunk vectors (bound
// to the content: a revision with other content and no windows drops them; a copy of
// the same content keeps them, as it keeps the value vector it does not carry), the
// BM25 terms with their frequencies and the document length (text.TermFreqs of the
// value text), and the key's terms. Deleted rows, high-sensitivity rows and
// non-searchable types hold identity and version only.
//
// Apply is idempotent and ordered by version per identity: a record seen twice, or an
// older revision after a newer one, changes nothing. Erasure fences (a user in a
// namespace, a whole namespace; an org's or a list's erasure arrives as one fence per
// namespace) forget their scope below their seq and keep the fence; a redaction drops
// the content of the versions it names; a revision whose data key is gone (Sealed)
// retires the content held for its memory_id at an older version. Nothing erased or
// redacted can be served, and a replay of the topic never brings it back.
//
// Vectors are int8 codes with a scale per vector (388 bytes at 384 dimensions instead of
// 1,536), scanned with an AVX2 integer dot product and rescored against the float32
// query; namespaces past Config.GraphMin value vectors also get an HNSW graph over the
// same codes, built in the background (graph.go), with the filter applied during the
// walk, the tail written since the build scanned exactly beside it (and added to a copy
// of the graph once it reaches a fiftieth of it), and exact scanning whenever a filter
// leaves few documents.
//
// # Checkpoint
//
// WriteCheckpoint writes what the index serves in a compact binary layout (varints, the
// int8 rows as they are, only live documents, current postings and the names and terms
// they use; no graph), and ReadCheckpoint loads it into an index that has applied
// nothing. The caller (internal/indexfeed) frames it with the topic offsets it stands
// for and a checksum. Warming/Warm bracket a warm-up: graph builds wait, and Warm drops
// what the warm-up left unserved before the builds start.
//
// # Position
//
// Each namespace has a position: the highest seq with nothing missing below it, moved
// by the rule the projector's watermarks follow (gapless.Advance: a seq past a gap is
// applied but does not move it; an erasure's seq jumps it). WaitFor waits on it in
// process.
//
// # Integration (what the caller wires)
//
//   - The barrier: capture the namespaces' generations as today, then
//     WaitFor(ctx, space, generation) for each within LOOM_PG_PROJECTION_WAIT_MS; a
//     deadline is 503 PROJECTION_BEHIND with the namespace, its generation and
//     Position(space). A warming process is behind every namespace, so it answers
//     PROJECTION_BEHIND rather than serve a partial index.
//   - The legs: per namespace one Search(space, Query) replaces the vector, chunk,
//     lexical and key statements; Query.Filter is query.filter (agent, user_id after the
//     read scope, session_id, memory_type, tags and tags_mode, statuses, Now, and
//     ValidAt = as_of), Terms the deduplicated text.Terms of the query, Limit the leg
//     pool, K1/B the BM25 settings. Hits carry identity, content_sha256, memory_type,
//     score and (lexical) coverage: exactly what legHit holds, so fusion, priors,
//     validation against the heads, stale_dropped and paging stay as they are. The graph
//     leg and as_of may keep reading ClickHouse. ErrNotHeld means the namespace is
//     served by the ClickHouse path (its barrier then waits on the projection watermark).
//   - The peer read: Peers(space, PeerQuery) replaces readPeers' statement; its
//     position replaces the ClickHouse watermark the admission captures before the read
//     (every revision at or below it is in what the read saw), so the gap check examines
//     the revisions committed after it. A process running both roles holds one Index.
//   - Budget: LOOM_INDEX_MAX_BYTES becomes indexfeed.Config.MaxBytes; past it the
//     coldest namespaces are evicted (Enforce) and answer ErrNotHeld until the process
//     restarts and replays.
//   - Metrics and health: Stats (namespaces, held, entries, vectors, bytes; per
//     namespace position and last seq seen) and indexfeed's Progress (warm, applied of
//     target, records behind) are what /metrics and /v1/health show.
package searchindex
