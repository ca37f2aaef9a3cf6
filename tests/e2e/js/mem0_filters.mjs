// Drives Loom's mem0 facade with mem0's own MemoryClient (mem0ai on npm), searching and
// listing with Loom's provenance filters written in mem0's filters grammar, and prints
// the keys each call served (or its error) for the Go test to check.
import MemoryClient from "mem0ai";

const [host, apiKey, appId, query] = process.argv.slice(2);
const client = new MemoryClient({ apiKey, host });
const keys = (results) => results.map((r) => r.loom.key).sort();
const attempt = async (fn) => {
  try {
    return { keys: keys(await fn()) };
  } catch (e) {
    return { error: { name: e.name, message: e.message } };
  }
};
const search = (filters) => attempt(async () => (await client.search(query, { filters: { app_id: appId, ...filters }, topK: 10 })).results);

const out = {
  all: await search({}),
  bothEntities: await search({ AND: [{ entities: "harbour  SURVEY" }, { entities: { icontains: "LOTTE" } }] }),
  imported: await search({ source_class: "imported" }),
  directOrDerived: await search({ source_class: { in: ["direct", "derived"] } }),
  verified: await search({ verified: true }),
  verifiedOrImported: await search({ OR: [{ verified: true }, { source_class: "imported" }] }),
  listNotVerified: await attempt(async () => (await client.getAll({ filters: { app_id: appId, verified: false } })).results),
  badOperator: await search({ verified: { gt: false } }),
  badClass: await search({ source_class: "gossip" }),
};
console.log(JSON.stringify(out));
