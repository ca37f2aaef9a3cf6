// The client against a real loomd: tests/e2e/tsclient_test.go starts one on real stores
// and runs `npm test` with LOOM_URL, LOOM_TOKEN (an org's writer), LOOM_READER_TOKEN (a
// reader of the same org), LOOM_ADMIN_TOKEN (its admin), LOOM_OPERATOR_TOKEN, LOOM_NS (a fresh namespace) and
// LOOM_LEARNINGS_NS (a namespace whose learnings queue holds one rule a scripted model extracted).

import assert from "node:assert/strict";
import { test } from "node:test";

import { createLoomClient, LoomError, ok, type Schemas } from "../src/index.js";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through tests/e2e (go test -run TestTypeScriptClient ./tests/e2e/)`);
  return v;
}

const baseUrl = need("LOOM_URL");
const ns = need("LOOM_NS");
const loom = createLoomClient({ baseUrl, token: need("LOOM_TOKEN") });
const reader = createLoomClient({ baseUrl, token: need("LOOM_READER_TOKEN") });
const operator = createLoomClient({ baseUrl, token: need("LOOM_OPERATOR_TOKEN") });

const memory = (key: string) => ({ params: { path: { ns, key } } });

test("a memory written, read, revised and searched answers the spec's types", async () => {
  const first = await ok(loom.PUT("/v1/namespaces/{ns}/memories/{key}", {
    ...memory("drink"), body: { value: "Alice drinks green tea every morning", user_id: "alice" },
  }));
  assert.ok("seq" in first, "a fresh write answers SetAnswer");
  assert.equal(first.written, true);
  assert.equal(first.event, "memory.written");
  assert.equal(typeof first.version_text, "string");

  const revised = await ok(loom.PUT("/v1/namespaces/{ns}/memories/{key}", {
    ...memory("drink"), body: { value: "Alice drinks oolong tea every morning", user_id: "alice" },
  }));
  assert.ok("seq" in revised);
  assert.equal(revised.event, "memory.revised");

  const head: Schemas["Memory"] = await ok(loom.GET("/v1/namespaces/{ns}/memories/{key}", {
    params: { path: { ns, key: "drink" }, query: { user_id: "alice" } },
  }));
  assert.equal(head.value, "Alice drinks oolong tea every morning");
  assert.equal(head.memory_id, first.memory_id);

  const history = await ok(loom.GET("/v1/namespaces/{ns}/memories/{key}/history", {
    params: { path: { ns, key: "drink" }, query: { user_id: "alice" } },
  }));
  assert.deepEqual(history.versions.map((v) => v.event), ["memory.written", "memory.revised"]);

  const found = await ok(loom.POST("/v1/namespaces/{ns}/memories:search", {
    params: { path: { ns } }, body: { query: "what tea does alice drink", user_id: "alice", top_k: 5 },
  }));
  assert.ok(found.hits.some((hit) => hit.memory_key === "drink"), `search found ${JSON.stringify(found.hits.map((hit) => hit.memory_key))}`);
});

test("search's provenance filters narrow the hits to entities, a source class or verified rows", async () => {
  await ok(loom.PUT("/v1/namespaces/{ns}/memories/{key}", {
    ...memory("ferry.imported"),
    body: { value: "the island ferry timetable lists a late boat on Fridays", entities: ["Island Ferry"], source_class: "imported" },
  }));
  await ok(loom.PUT("/v1/namespaces/{ns}/memories/{key}", {
    ...memory("ferry.checked"), body: { value: "the island ferry timetable was checked against the harbour office" },
  }));
  await ok(loom.POST("/v1/namespaces/{ns}/memories/{key}:verify", { ...memory("ferry.checked"), body: {} }));
  const keys = async (filters: Partial<Schemas["SearchRequest"]>) => {
    const found = await ok(loom.POST("/v1/namespaces/{ns}/memories:search", {
      params: { path: { ns } }, body: { query: "island ferry timetable", top_k: 10, ...filters },
    }));
    return found.hits.map((hit) => hit.memory_key).filter((k) => k.startsWith("ferry.")).sort();
  };
  assert.deepEqual(await keys({}), ["ferry.checked", "ferry.imported"]);
  assert.deepEqual(await keys({ entities: ["island  FERRY"] }), ["ferry.imported"]);
  assert.deepEqual(await keys({ source_class: ["direct"] }), ["ferry.checked"]);
  assert.deepEqual(await keys({ verified: true }), ["ferry.checked"]);
  assert.deepEqual(await keys({ verified: false, source_class: ["imported", "external"] }), ["ferry.imported"]);
});

test("a key holding ':' travels percent-encoded", async () => {
  const key = "pref:color";
  await ok(loom.PUT("/v1/namespaces/{ns}/memories/{key}", { ...memory(key), body: { value: "blue" } }));
  const head = await ok(loom.GET("/v1/namespaces/{ns}/memories/{key}", memory(key)));
  assert.equal(head.memory_key, key);
  assert.equal(head.value, "blue");
});

test("context.pack answers a block within its budget, every line cited", async () => {
  await ok(loom.PUT("/v1/namespaces/{ns}/memories/{key}", {
    ...memory("city"), body: { value: "Alice lives in Lisbon", user_id: "alice" },
  }));
  const pack = await ok(loom.POST("/v1/namespaces/{ns}/context:pack", {
    params: { path: { ns } }, body: { query: "where does alice live", user_id: "alice", budget_tokens: 200, sections: ["facts", "recent"] },
  }));
  assert.equal(pack.budget_tokens, 200);
  assert.ok(pack.tokens > 0 && pack.tokens <= pack.budget_tokens, `tokens ${pack.tokens} of ${pack.budget_tokens}`);
  assert.match(pack.block, /Lisbon/);
  const lines = pack.sections.flatMap((s) => s.lines);
  assert.ok(lines.length > 0);
  for (const line of lines) assert.match(line.cite, /^m:[0-9a-f-]+@\d+$/, `a line's citation: ${line.cite}`);
  assert.deepEqual(pack.citations, [...new Set(lines.map((line) => line.cite))], "citations: every line's, each once, in order");
});

test("a namespace opts in to profile_consolidation; profile.render answers every row it renders", async () => {
  const admin = createLoomClient({ baseUrl, token: need("LOOM_ADMIN_TOKEN") });
  const pns = `${ns}-profiles`;
  const put = await ok(admin.PUT("/v1/namespaces/{ns}", { params: { path: { ns: pns } }, body: { profile_consolidation: true } }));
  assert.equal(put.config.profile_consolidation, true);
  const got = await ok(reader.GET("/v1/namespaces/{ns}", { params: { path: { ns: pns } } }));
  assert.equal(got.config.profile_consolidation, true);
  // No pass has built a profile or a section here (this loomd has no model): 404.
  await assert.rejects(ok(loom.GET("/v1/namespaces/{ns}/profiles/{user_id}/render", { params: { path: { ns: pns, user_id: "alice" } } })),
    (err: unknown) => err instanceof LoomError && err.status === 404 && err.code === "RESOURCE_NOT_FOUND");
  // The rendered profile's type names the section's citation beside the profile's.
  const rendered: Pick<Schemas["RenderedProfile"], "citation" | "citations"> = {
    citation: `${pns}/profile_section:alice@1`, citations: [`${pns}/profile_section:alice@1`],
  };
  assert.equal(rendered.citations[0], rendered.citation);
});

test("learnings.list answers the rules about the agent, each with its supporters' quotes, typed", async () => {
  const lns = need("LOOM_LEARNINGS_NS");
  const got = await ok(loom.GET("/v1/namespaces/{ns}/learnings", { params: { path: { ns: lns }, query: { limit: 10 } } }));
  assert.equal(got.namespace, lns);
  assert.equal(got.learnings.length, 1);
  const rule = got.learnings[0];
  assert.ok(rule);
  assert.equal(rule.rule, "Answer in French");
  assert.equal(rule.status, "pending");
  assert.deepEqual(rule.supporters.map((s) => [s.user_id, s.message_index, s.quote]), [["alice", 0, "From now on, always answer me in French please."]]);
  // The queue is for whoever reviews the bot's rules: a reader's token is refused.
  await assert.rejects(ok(reader.GET("/v1/namespaces/{ns}/learnings", { params: { path: { ns: lns } } })),
    (err: unknown) => err instanceof LoomError && err.status === 403 && err.code === "PERMISSION_DENIED");
});

test("an error answer is a LoomError with the envelope's fields", async () => {
  await assert.rejects(ok(loom.GET("/v1/namespaces/{ns}/memories/{key}", memory("never-written"))), (err: unknown) => {
    assert.ok(err instanceof LoomError);
    assert.equal(err.status, 404);
    assert.equal(err.code, "RESOURCE_NOT_FOUND");
    assert.equal(err.retryable, false);
    return true;
  });
  await assert.rejects(ok(loom.POST("/v1/namespaces/{ns}/context:pack", {
    params: { path: { ns } }, body: { query: "x", budget_tokens: 3 },
  })), (err: unknown) => {
    assert.ok(err instanceof LoomError);
    assert.equal(err.status, 422);
    assert.equal(err.code, "VALIDATION_FAILED");
    assert.equal(err.field, "budget_tokens");
    return true;
  });
  await assert.rejects(ok(reader.PUT("/v1/namespaces/{ns}/memories/{key}", { ...memory("drink"), body: { value: "coffee" } })),
    (err: unknown) => err instanceof LoomError && err.status === 403 && err.code === "PERMISSION_DENIED");
});

// A proxy in front of loomd loses the answer of a write that committed and answers a
// retryable 503 instead (as a load balancer whose upstream restarted would). The client
// retries after Retry-After under the same Idempotency-Key, and loomd answers the
// first commit's answer: the key has one version, not two.
test("a retryable answer is retried under the same Idempotency-Key; the write commits once", async () => {
  const sent: { method: string; key: string | null }[] = [];
  const retried: number[] = [];
  let lose = 1;
  const flaky = createLoomClient({
    baseUrl, token: need("LOOM_TOKEN"), maxRetryDelayMs: 50,
    onRetry: ({ status }) => retried.push(status),
    fetch: async (input, init) => {
      const request = new Request(input, init);
      sent.push({ method: request.method, key: request.headers.get("Idempotency-Key") });
      const answer = await fetch(request);
      if (lose-- > 0) {
        return new Response(JSON.stringify({ error: { code: "POSTGRES_UNAVAILABLE", message: "upstream restarted", retryable: true, retry_after_s: 1 } }),
          { status: 503, headers: { "Content-Type": "application/json", "Retry-After": "1" } });
      }
      return answer;
    },
  });
  const set = await ok(flaky.PUT("/v1/namespaces/{ns}/memories/{key}", { ...memory("once"), body: { value: "written once" } }));
  assert.deepEqual(retried, [503]);
  assert.equal(sent.length, 2);
  assert.ok(sent[0]?.key, "a write carries an Idempotency-Key");
  assert.equal(sent[1]?.key, sent[0]?.key, "the retry carries the same key");
  assert.ok(set.memory_id, "the retry answers the commit");
  const history = await ok(loom.GET("/v1/namespaces/{ns}/memories/{key}/history", memory("once")));
  assert.equal(history.versions.length, 1, "the write committed once");
});

test("an answer that is not retryable is not asked again", async () => {
  let calls = 0;
  const counting = createLoomClient({
    baseUrl, token: need("LOOM_TOKEN"),
    fetch: async (input, init) => { calls++; return fetch(input, init); },
  });
  await assert.rejects(ok(counting.GET("/v1/namespaces/{ns}/memories/{key}", memory("never-written"))), LoomError);
  assert.equal(calls, 1);
});

test("the operator's token reads the deployment's health and no org's memory", async () => {
  const health = await ok(operator.GET("/v1/health", { params: { query: { include: "postgres,lag,workers" } } }));
  assert.equal(health.status, "ok");
  assert.ok(health.deployment_id, "the operator reads the deployment");
  assert.ok(health.postgres && "outbox_depth" in health.postgres, `postgres: ${JSON.stringify(health.postgres)}`);
  assert.equal(typeof health.postgres.outbox_depth, "number");
  await assert.rejects(ok(operator.GET("/v1/namespaces/{ns}/memories/{key}", memory("drink"))),
    (err: unknown) => err instanceof LoomError && err.status === 403);
});

// The console's Operations view is health's details: the client reads them as typed as
// the rest. The namespace this file wrote is listed with its generation, and its write
// reaches the change topic as an envelope whose content stays sealed.
test("the operator reads each namespace's lag, the erasures, the extraction queue and the topic's envelopes", async () => {
  type Envelope = Extract<NonNullable<Schemas["Health"]["topic_latest"]>, unknown[]>[number];
  let found: Envelope[] | undefined;
  for (let attempt = 0; attempt < 120 && !found; attempt++) {
    const health = await ok(operator.GET("/v1/health", { params: { query: { include: "namespaces,erasures,extractions,topic" } } }));
    assert.ok(health.namespaces && "listed" in health.namespaces, `namespaces: ${JSON.stringify(health.namespaces)}`);
    assert.ok(health.erasures && "by_status" in health.erasures, `erasures: ${JSON.stringify(health.erasures)}`);
    assert.ok(health.extractions && "by_status" in health.extractions, `extractions: ${JSON.stringify(health.extractions)}`);
    const mine = health.namespaces.listed.find((n) => n.namespace === ns);
    assert.ok(mine, `the namespace written is listed among ${health.namespaces.total}`);
    assert.ok(mine.generation >= 1);
    const topic = health.topic_latest;
    assert.ok(Array.isArray(topic), `topic_latest: ${JSON.stringify(topic)}`);
    if (topic.some((r) => r.namespace === ns)) found = topic;
    else await new Promise((resolve) => setTimeout(resolve, 500));
  }
  assert.ok(found, "the namespace's records reached the topic's latest");
  for (const r of found.filter((r) => r.namespace === ns)) {
    assert.ok(r.type?.startsWith("memory."), r.type);
    if (r.type === "memory.written" || r.type === "memory.revised") assert.equal(r.sealed, true);
    assert.ok(!JSON.stringify(r).includes("Lisbon") && !JSON.stringify(r).includes("tea"), "no content in an envelope shown");
  }
});
