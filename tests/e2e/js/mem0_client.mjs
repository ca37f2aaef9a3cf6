// Drives Loom's mem0 facade with mem0's own MemoryClient (mem0ai on npm) and prints what
// each call answered, as the client hands it to its caller, for the Go test to check.
import MemoryClient from "mem0ai";

const [host, apiKey, runTag] = process.argv.slice(2);
const client = new MemoryClient({ apiKey, host });
const alice = `alice-${runTag}`;
const bob = `bob-${runTag}`;

const out = {};
const attempt = async (fn) => {
  try {
    return { ok: await fn() };
  } catch (e) {
    return { error: { name: e.name, message: e.message, code: e.errorCode } };
  }
};

out.add = await client.add(
  [
    { role: "user", content: "I live in Lisbon and I walk to work." },
    { role: "assistant", content: "Noted: you commute on foot in Lisbon." },
  ],
  { userId: alice, agentId: "helper", infer: false, metadata: { topic: "home", rank: 2 } },
);
out.addBob = await client.add([{ role: "user", content: "Bob drinks green tea every morning." }], { userId: bob, infer: false, metadata: { topic: "food" } });
out.addInferred = await attempt(() => client.add([{ role: "user", content: "Remember that I like jazz." }], { userId: alice }));

out.search = await client.search("where does the user live?", {
  filters: { AND: [{ user_id: alice }, { created_at: { gte: "2020-01-01" } }] },
  topK: 5,
});
out.searchMetadata = await client.search("tea", { filters: { OR: [{ user_id: alice }, { user_id: bob }], metadata: { topic: "food" } } });
out.getAllPage1 = await client.getAll({ filters: { user_id: alice }, page: 1, pageSize: 1 });
out.getAllAgent = await client.getAll({ filters: { AND: [{ agent_id: "helper" }, { user_id: { in: [alice] } }] } });

const id = out.add.results[0].id;
out.get = await client.get(id);
out.update = await client.update(id, { text: "I live in Porto now and I cycle to work.", metadata: { topic: "home", rank: 3 } });
out.getAfterUpdate = await client.get(id);
out.history = await client.history(id);
out.batchUpdate = await client.batchUpdate([{ memoryId: out.add.results[1].id, text: "Noted: you cycle in Porto." }]);
out.delete = await client.delete(id);
out.getAfterDelete = await attempt(() => client.get(id));
out.deleteAll = await client.deleteAll({ userId: bob });
out.getAllBobAfter = await client.getAll({ filters: { user_id: bob } });
out.batchDelete = await client.batchDelete([out.add.results[1].id]);
out.getAllAliceAfter = await client.getAll({ filters: { user_id: alice } });
out.badFilter = await attempt(() => client.getAll({ filters: { keywords: "x" } }));
console.log(JSON.stringify(out));
