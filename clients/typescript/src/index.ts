// Loom's TypeScript client: the routes and bodies of schemas/openapi.yaml as types
// (openapi-typescript writes them to schema.gen.ts), called through openapi-fetch, with
// three things of Loom's added: the bearer token, the error envelope as a typed error
// (LoomError) and retries of the answers the envelope marks retryable.

import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.gen.js";

export type { components, paths };
export type Schemas = components["schemas"];
/** The error envelope's body: `{"error": {code, message, retryable, ...}}`'s inner object. */
export type ErrorBody = Schemas["Error"];
export type ErrorCode = ErrorBody["code"];

/** An error answer of the API, with its envelope's fields. */
export class LoomError extends Error {
  readonly status: number;
  readonly code: ErrorCode | "";
  readonly retryable: boolean;
  /** Present on a retryable error: the seconds the server asks to wait (Retry-After). */
  readonly retryAfterS?: number;
  /** The request field a 422 is about. */
  readonly field?: string;
  /** The whole envelope as answered (some codes carry more fields). */
  readonly body: ErrorBody | undefined;

  constructor(status: number, body: ErrorBody | undefined) {
    super(body?.message || `HTTP ${status}`);
    this.name = "LoomError";
    this.status = status;
    this.code = body?.code ?? "";
    this.retryable = body?.retryable ?? false;
    this.retryAfterS = body?.retry_after_s;
    this.field = body?.field;
    this.body = body;
  }
}

export interface LoomClientOptions {
  /** Where loomd answers, e.g. http://localhost:8080 (no /v1). */
  baseUrl: string;
  /** A Loom token (`loom_…`); sent as `Authorization: Bearer`. Absent: only health answers. */
  token?: string;
  /** How many times a retryable answer is asked again (default 3; 0 never). */
  retries?: number;
  /** The longest wait before a retry, whatever Retry-After asks (default 10 s). */
  maxRetryDelayMs?: number;
  /** The fetch to call (default globalThis.fetch). */
  fetch?: typeof globalThis.fetch;
  /** Called before each retry: for logs and tests. */
  onRetry?: (info: { attempt: number; delayMs: number; status: number; code: string }) => void;
}

export type LoomClient = Client<paths> & {
  /** The options the client was made with (the token left out). */
  readonly baseUrl: string;
};

const WRITE_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * createLoomClient returns an openapi-fetch client of Loom's routes: `loom.GET(path,
 * {params})`, `loom.POST(path, {params, body})`, … typed by the spec. It answers
 * openapi-fetch's `{data, error, response}`; `ok()` turns that into the data or a
 * thrown LoomError.
 *
 * A retryable error (the envelope's `retryable`: a 503 such as PROJECTION_BEHIND or
 * ADMISSION_CONTENDED, a 408) is asked again after the Retry-After it carries. A write
 * is given an `Idempotency-Key` (unless it has one), the same on each attempt, so that
 * a retry of a write that did commit answers its first answer and never writes twice.
 */
export function createLoomClient(opts: LoomClientOptions): LoomClient {
  const retries = opts.retries ?? 3;
  const maxDelay = opts.maxRetryDelayMs ?? 10_000;
  const baseFetch = opts.fetch ?? globalThis.fetch;

  const retrying = async (input: Request): Promise<Response> => {
    let request = input;
    if (WRITE_METHODS.has(request.method) && !request.headers.has("Idempotency-Key")) {
      const headers = new Headers(request.headers);
      headers.set("Idempotency-Key", newIdempotencyKey());
      request = new Request(request, { headers });
    }
    for (let attempt = 1; ; attempt++) {
      const response = await baseFetch(request.clone());
      if (response.ok || attempt > retries) return response;
      const envelope = await readEnvelope(response.clone());
      if (!envelope?.retryable) return response;
      const delayMs = Math.min(retryDelayS(response, envelope) * 1000, maxDelay);
      opts.onRetry?.({ attempt, delayMs, status: response.status, code: envelope.code });
      await response.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  };

  const client = createClient<paths>({
    baseUrl: opts.baseUrl.replace(/\/+$/, ""),
    fetch: retrying,
    headers: opts.token ? { Authorization: `Bearer ${opts.token}` } : {},
  });
  return Object.assign(client, { baseUrl: opts.baseUrl });
}

// newIdempotencyKey is a random UUID. A browser has crypto.randomUUID only in a secure
// context (https, localhost); the console served over plain http elsewhere has
// getRandomValues, from which the same v4 UUID is made.
function newIdempotencyKey(): string {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

async function readEnvelope(response: Response): Promise<ErrorBody | undefined> {
  try {
    const body = (await response.json()) as { error?: ErrorBody };
    return body?.error;
  } catch {
    return undefined; // not the envelope (a proxy's page): not retried
  }
}

// retryDelayS is what the server asks: the Retry-After header (seconds), else the
// envelope's retry_after_s, else one second.
function retryDelayS(response: Response, envelope: ErrorBody): number {
  const header = Number(response.headers.get("Retry-After"));
  if (Number.isFinite(header) && header > 0) return header;
  return envelope.retry_after_s ?? 1;
}

/**
 * ok awaits a call of the client and answers its data, or throws the error answer as a
 * LoomError:
 *
 *     const head = await ok(loom.GET("/v1/namespaces/{ns}/memories/{key}", {
 *       params: { path: { ns: "support", key: "drink" }, query: { user_id: "alice" } },
 *     }));
 */
export async function ok<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok || error !== undefined) {
    const body = (error as { error?: ErrorBody } | undefined)?.error;
    throw new LoomError(response.status, body);
  }
  return data as T;
}

export { ingestionEnded, knowledgeClient } from "./knowledge.js";
export type {
  DatasetQuery, DocumentInput, DocumentListOptions, DocumentWritten, KnowledgeClient, KnowledgeSearchRequest, SynthesizeRequest, Version, WriteOptions,
} from "./knowledge.js";
