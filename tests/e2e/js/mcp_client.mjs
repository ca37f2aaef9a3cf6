// Drives loomd's MCP server with the official TypeScript SDK, over streamable HTTP or
// stdio, and prints what each step answered as one JSON object for the Go test to check.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [transportKind, target, token, ns] = process.argv.slice(2);

let transport;
if (transportKind === "http") {
  transport = new StreamableHTTPClientTransport(new URL(target), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
} else {
  // target is "loomd-binary|loom-base-url|token-file"
  const [bin, url, tokenFile] = target.split("|");
  transport = new StdioClientTransport({ command: bin, args: ["mcp", "--url", url, "--token-file", tokenFile], stderr: "inherit" });
}

const client = new Client({ name: "loom-e2e", version: "1.0.0" });
await client.connect(transport);

const out = {};
out.server = client.getServerVersion();
out.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, hasOutputSchema: !!t.outputSchema, required: t.inputSchema.required }));
const call = (name, args) => client.callTool({ name, arguments: args });
out.set = await call("memory_set", { namespace: ns, key: "editor-theme", value: "the user prefers dark mode in the editor", user_id: "alice" });
out.search = await call("memory_search", { namespace: ns, query: "what theme does the user like in the editor?", user_id: "alice" });
out.get = await call("memory_get", { namespace: ns, key: "editor-theme", user_id: "alice" });
await call("memory_set", { namespace: ns, key: "font", value: "a monospaced font" });
out.resource = await client.readResource({ uri: `loom://${ns}/font` });
out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
out.delete = await call("memory_delete", { namespace: ns, key: "editor-theme", user_id: "alice" });
out.getAfterDelete = await call("memory_get", { namespace: ns, key: "editor-theme", user_id: "alice" });
out.badArgs = await call("memory_set", { namespace: ns, key: "k" });
// The admin's upkeep tools (the token is an admin's): the SDK checks each answer
// against the tool's output schema.
out.profileSchema = await call("profile_schema_set", { namespace: ns, schema: {
  type: "object", additionalProperties: false, required: ["drink"], properties: { drink: { type: ["string", "null"] } } } });
for (const [key, value] of [["coffee-1", "Bo drinks dark roast coffee every morning"],
  ["coffee-2", "Bo drinks dark roast coffee each morning at home"], ["coffee-3", "Every morning Bo drinks a dark roast coffee"]]) {
  await call("memory_set", { namespace: ns, key, value, user_id: "bo" });
}
out.consolidate = await call("memory_consolidate", { namespace: ns, user_id: "bo", dry_run: true, min_similarity: 0.6 });
out.profileUnbuilt = await call("profile_structured", { namespace: ns, user_id: "bo" });
out.undoUnknown = await call("memory_consolidate_undo", { namespace: ns, run_id: "00000000-0000-4000-8000-000000000001" });
console.log(JSON.stringify(out));
await client.close();
