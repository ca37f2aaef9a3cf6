// Drives loomd's memory_search tool with the official TypeScript SDK over streamable
// HTTP, once per provenance filter, and prints the keys each call served (or its error
// text) as one JSON object for the Go test to check.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [target, token, ns, query] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(target), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "loom-e2e-filters", version: "1.0.0" });
await client.connect(transport);

const filters = {
  all: {},
  bothEntities: { entities: ["harbour  SURVEY", "Lotte"] },
  imported: { source_class: ["imported"] },
  verified: { verified: true },
  notVerified: { verified: false },
  badClass: { source_class: ["gossip"] },
};
const out = {};
for (const [name, f] of Object.entries(filters)) {
  const r = await client.callTool({ name: "memory_search", arguments: { namespace: ns, query, top_k: 10, ...f } });
  out[name] = r.isError
    ? { error: r.content.map((c) => c.text).join("\n") }
    : { keys: r.structuredContent.hits.map((h) => h.memory_key).sort() };
}
console.log(JSON.stringify(out));
await client.close();
