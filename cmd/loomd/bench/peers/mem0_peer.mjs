// The mem0 side of `loomd bench --scenario peers`: mem0's open-source store (the npm
// mem0ai package's Memory, its SQLite vector store and history) adds the facts one at a
// time without inference (mem0 judges nothing then: one embedding, one insert, one
// history row) and searches at each checkpoint. It reads the run from stdin and writes
// one JSON object to stdout: every add's milliseconds, and per checkpoint each search's
// milliseconds, its top hit and the process's resident bytes.
import { Memory } from "mem0ai/oss";
import { readFileSync } from "node:fs";
import path from "node:path";

const run = JSON.parse(readFileSync(0, "utf8"));
const memory = new Memory({
  version: "v1.1",
  embedder: { provider: "openai", config: { apiKey: "bench", baseURL: run.base_url, model: run.model, embeddingDims: run.dim } },
  vectorStore: { provider: "memory", config: { collectionName: "peers", dimension: run.dim, dbPath: path.join(run.dir, "vector_store.db") } },
  llm: { provider: "openai", config: { apiKey: "bench", baseURL: run.base_url, model: "bench-unused" } },
  historyDbPath: path.join(run.dir, "history.db"),
});

const out = { add_ms: [], checkpoints: [] };
let written = 0;
for (const cp of run.checkpoints) {
  for (; written < cp.size; written++) {
    const t0 = performance.now();
    await memory.add(run.facts[written], { userId: "bench", infer: false });
    out.add_ms.push(performance.now() - t0);
  }
  const searches = [];
  for (const q of cp.queries) {
    const t0 = performance.now();
    const res = await memory.search(q.query, { filters: { user_id: "bench" }, topK: 5 });
    const ms = performance.now() - t0;
    searches.push({ ms, top: res.results.length > 0 ? res.results[0].memory : "" });
  }
  out.checkpoints.push({ size: cp.size, searches, rss_bytes: process.memoryUsage().rss });
}
process.stdout.write(JSON.stringify(out));
