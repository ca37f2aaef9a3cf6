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
console.log(JSON.stringify(out));
await client.close();
