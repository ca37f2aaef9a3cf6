// Built by `make console` from console/src and clients/typescript/src (console/build.mjs): do not edit.

// node_modules/openapi-fetch/dist/index.mjs
var PATH_PARAM_RE = /\{[^{}]+\}/g;
var supportsRequestInitExt = () => {
  return typeof process === "object" && Number.parseInt(process?.versions?.node?.substring(0, 2)) >= 18 && process.versions.undici;
};
function randomID() {
  return Math.random().toString(36).slice(2, 11);
}
function createClient(clientOptions) {
  let {
    baseUrl = "",
    Request: CustomRequest = globalThis.Request,
    fetch: baseFetch = globalThis.fetch,
    querySerializer: globalQuerySerializer,
    bodySerializer: globalBodySerializer,
    pathSerializer: globalPathSerializer,
    headers: baseHeaders,
    requestInitExt = void 0,
    ...baseOptions
  } = { ...clientOptions };
  requestInitExt = supportsRequestInitExt() ? requestInitExt : void 0;
  baseUrl = removeTrailingSlash(baseUrl);
  const globalMiddlewares = [];
  async function coreFetch(schemaPath, fetchOptions) {
    const {
      baseUrl: localBaseUrl,
      fetch = baseFetch,
      Request: Request2 = CustomRequest,
      headers,
      params = {},
      parseAs = "json",
      querySerializer: requestQuerySerializer,
      bodySerializer = globalBodySerializer ?? defaultBodySerializer,
      pathSerializer: requestPathSerializer,
      body,
      middleware: requestMiddlewares = [],
      ...init
    } = fetchOptions || {};
    let finalBaseUrl = baseUrl;
    if (localBaseUrl) {
      finalBaseUrl = removeTrailingSlash(localBaseUrl) ?? baseUrl;
    }
    let querySerializer = typeof globalQuerySerializer === "function" ? globalQuerySerializer : createQuerySerializer(globalQuerySerializer);
    if (requestQuerySerializer) {
      querySerializer = typeof requestQuerySerializer === "function" ? requestQuerySerializer : createQuerySerializer({
        ...typeof globalQuerySerializer === "object" ? globalQuerySerializer : {},
        ...requestQuerySerializer
      });
    }
    const pathSerializer = requestPathSerializer || globalPathSerializer || defaultPathSerializer;
    const serializedBody = body === void 0 ? void 0 : bodySerializer(
      body,
      // Note: we declare mergeHeaders() both here and below because it’s a bit of a chicken-or-egg situation:
      // bodySerializer() needs all headers so we aren’t dropping ones set by the user, however,
      // the result of this ALSO sets the lowest-priority content-type header. So we re-merge below,
      // setting the content-type at the very beginning to be overwritten.
      // Lastly, based on the way headers work, it’s not a simple “present-or-not” check becauase null intentionally un-sets headers.
      mergeHeaders(baseHeaders, headers, params.header)
    );
    const finalHeaders = mergeHeaders(
      // with no body, we should not to set Content-Type
      serializedBody === void 0 || // if serialized body is FormData; browser will correctly set Content-Type & boundary expression
      serializedBody instanceof FormData ? {} : {
        "Content-Type": "application/json"
      },
      baseHeaders,
      headers,
      params.header
    );
    const finalMiddlewares = [...globalMiddlewares, ...requestMiddlewares];
    const requestInit = {
      redirect: "follow",
      ...baseOptions,
      ...init,
      body: serializedBody,
      headers: finalHeaders
    };
    let id;
    let options;
    let request = new Request2(
      createFinalURL(schemaPath, { baseUrl: finalBaseUrl, params, querySerializer, pathSerializer }),
      requestInit
    );
    let response;
    for (const key in init) {
      if (!(key in request)) {
        request[key] = init[key];
      }
    }
    if (finalMiddlewares.length) {
      id = randomID();
      options = Object.freeze({
        baseUrl: finalBaseUrl,
        fetch,
        parseAs,
        querySerializer,
        bodySerializer,
        pathSerializer
      });
      for (const m of finalMiddlewares) {
        if (m && typeof m === "object" && typeof m.onRequest === "function") {
          const result = await m.onRequest({
            request,
            schemaPath,
            params,
            options,
            id
          });
          if (result) {
            if (result instanceof Request2) {
              request = result;
            } else if (result instanceof Response) {
              response = result;
              break;
            } else {
              throw new Error("onRequest: must return new Request() or Response() when modifying the request");
            }
          }
        }
      }
    }
    if (!response) {
      try {
        response = await fetch(request, requestInitExt);
      } catch (error2) {
        let errorAfterMiddleware = error2;
        if (finalMiddlewares.length) {
          for (let i = finalMiddlewares.length - 1; i >= 0; i--) {
            const m = finalMiddlewares[i];
            if (m && typeof m === "object" && typeof m.onError === "function") {
              const result = await m.onError({
                request,
                error: errorAfterMiddleware,
                schemaPath,
                params,
                options,
                id
              });
              if (result) {
                if (result instanceof Response) {
                  errorAfterMiddleware = void 0;
                  response = result;
                  break;
                }
                if (result instanceof Error) {
                  errorAfterMiddleware = result;
                  continue;
                }
                throw new Error("onError: must return new Response() or instance of Error");
              }
            }
          }
        }
        if (errorAfterMiddleware) {
          throw errorAfterMiddleware;
        }
      }
      if (finalMiddlewares.length) {
        for (let i = finalMiddlewares.length - 1; i >= 0; i--) {
          const m = finalMiddlewares[i];
          if (m && typeof m === "object" && typeof m.onResponse === "function") {
            const result = await m.onResponse({
              request,
              response,
              schemaPath,
              params,
              options,
              id
            });
            if (result) {
              if (!(result instanceof Response)) {
                throw new Error("onResponse: must return new Response() when modifying the response");
              }
              response = result;
            }
          }
        }
      }
    }
    const contentLength = response.headers.get("Content-Length");
    if (response.status === 204 || request.method === "HEAD" || contentLength === "0" && !response.headers.get("Transfer-Encoding")?.includes("chunked")) {
      return response.ok ? { data: void 0, response } : { error: void 0, response };
    }
    if (response.ok) {
      const getResponseData = async () => {
        if (parseAs === "stream") {
          return response.body;
        }
        if (parseAs === "json" && !contentLength) {
          const raw = await response.text();
          return raw ? JSON.parse(raw) : void 0;
        }
        return await response[parseAs]();
      };
      return { data: await getResponseData(), response };
    }
    let error = await response.text();
    try {
      error = JSON.parse(error);
    } catch {
    }
    return { error, response };
  }
  return {
    request(method, url, init) {
      return coreFetch(url, { ...init, method: method.toUpperCase() });
    },
    /** Call a GET endpoint */
    GET(url, init) {
      return coreFetch(url, { ...init, method: "GET" });
    },
    /** Call a PUT endpoint */
    PUT(url, init) {
      return coreFetch(url, { ...init, method: "PUT" });
    },
    /** Call a POST endpoint */
    POST(url, init) {
      return coreFetch(url, { ...init, method: "POST" });
    },
    /** Call a DELETE endpoint */
    DELETE(url, init) {
      return coreFetch(url, { ...init, method: "DELETE" });
    },
    /** Call a OPTIONS endpoint */
    OPTIONS(url, init) {
      return coreFetch(url, { ...init, method: "OPTIONS" });
    },
    /** Call a HEAD endpoint */
    HEAD(url, init) {
      return coreFetch(url, { ...init, method: "HEAD" });
    },
    /** Call a PATCH endpoint */
    PATCH(url, init) {
      return coreFetch(url, { ...init, method: "PATCH" });
    },
    /** Call a TRACE endpoint */
    TRACE(url, init) {
      return coreFetch(url, { ...init, method: "TRACE" });
    },
    /** Register middleware */
    use(...middleware) {
      for (const m of middleware) {
        if (!m) {
          continue;
        }
        if (typeof m !== "object" || !("onRequest" in m || "onResponse" in m || "onError" in m)) {
          throw new Error("Middleware must be an object with one of `onRequest()`, `onResponse() or `onError()`");
        }
        globalMiddlewares.push(m);
      }
    },
    /** Unregister middleware */
    eject(...middleware) {
      for (const m of middleware) {
        const i = globalMiddlewares.indexOf(m);
        if (i !== -1) {
          globalMiddlewares.splice(i, 1);
        }
      }
    }
  };
}
function serializePrimitiveParam(name, value, options) {
  if (value === void 0 || value === null) {
    return "";
  }
  if (typeof value === "object") {
    throw new Error(
      "Deeply-nested arrays/objects aren’t supported. Provide your own `querySerializer()` to handle these."
    );
  }
  return `${name}=${options?.allowReserved === true ? value : encodeURIComponent(value)}`;
}
function serializeObjectParam(name, value, options) {
  if (!value || typeof value !== "object") {
    return "";
  }
  const values = [];
  const joiner = {
    simple: ",",
    label: ".",
    matrix: ";"
  }[options.style] || "&";
  if (options.style !== "deepObject" && options.explode === false) {
    for (const k in value) {
      values.push(k, options.allowReserved === true ? value[k] : encodeURIComponent(value[k]));
    }
    const final2 = values.join(",");
    switch (options.style) {
      case "form": {
        return `${name}=${final2}`;
      }
      case "label": {
        return `.${final2}`;
      }
      case "matrix": {
        return `;${name}=${final2}`;
      }
      default: {
        return final2;
      }
    }
  }
  for (const k in value) {
    const finalName = options.style === "deepObject" ? `${name}[${k}]` : k;
    values.push(serializePrimitiveParam(finalName, value[k], options));
  }
  const final = values.join(joiner);
  return options.style === "label" || options.style === "matrix" ? `${joiner}${final}` : final;
}
function serializeArrayParam(name, value, options) {
  if (!Array.isArray(value)) {
    return "";
  }
  if (options.explode === false) {
    const joiner2 = { form: ",", spaceDelimited: "%20", pipeDelimited: "|" }[options.style] || ",";
    const final = (options.allowReserved === true ? value : value.map((v) => encodeURIComponent(v))).join(joiner2);
    switch (options.style) {
      case "simple": {
        return final;
      }
      case "label": {
        return `.${final}`;
      }
      case "matrix": {
        return `;${name}=${final}`;
      }
      // case "spaceDelimited":
      // case "pipeDelimited":
      default: {
        return `${name}=${final}`;
      }
    }
  }
  const joiner = { simple: ",", label: ".", matrix: ";" }[options.style] || "&";
  const values = [];
  for (const v of value) {
    if (options.style === "simple" || options.style === "label") {
      values.push(options.allowReserved === true ? v : encodeURIComponent(v));
    } else {
      values.push(serializePrimitiveParam(name, v, options));
    }
  }
  return options.style === "label" || options.style === "matrix" ? `${joiner}${values.join(joiner)}` : values.join(joiner);
}
function createQuerySerializer(options) {
  return function querySerializer(queryParams) {
    const search = [];
    if (queryParams && typeof queryParams === "object") {
      for (const name in queryParams) {
        const value = queryParams[name];
        if (value === void 0 || value === null) {
          continue;
        }
        if (Array.isArray(value)) {
          if (value.length === 0) {
            continue;
          }
          search.push(
            serializeArrayParam(name, value, {
              style: "form",
              explode: true,
              ...options?.array,
              allowReserved: options?.allowReserved || false
            })
          );
          continue;
        }
        if (typeof value === "object") {
          search.push(
            serializeObjectParam(name, value, {
              style: "deepObject",
              explode: true,
              ...options?.object,
              allowReserved: options?.allowReserved || false
            })
          );
          continue;
        }
        search.push(serializePrimitiveParam(name, value, options));
      }
    }
    return search.join("&");
  };
}
function defaultPathSerializer(pathname, pathParams) {
  let nextURL = pathname;
  for (const match of pathname.match(PATH_PARAM_RE) ?? []) {
    let name = match.substring(1, match.length - 1);
    let explode = false;
    let style = "simple";
    if (name.endsWith("*")) {
      explode = true;
      name = name.substring(0, name.length - 1);
    }
    if (name.startsWith(".")) {
      style = "label";
      name = name.substring(1);
    } else if (name.startsWith(";")) {
      style = "matrix";
      name = name.substring(1);
    }
    if (!pathParams || pathParams[name] === void 0 || pathParams[name] === null) {
      continue;
    }
    const value = pathParams[name];
    if (Array.isArray(value)) {
      nextURL = nextURL.replace(match, serializeArrayParam(name, value, { style, explode }));
      continue;
    }
    if (typeof value === "object") {
      nextURL = nextURL.replace(match, serializeObjectParam(name, value, { style, explode }));
      continue;
    }
    if (style === "matrix") {
      nextURL = nextURL.replace(match, `;${serializePrimitiveParam(name, value)}`);
      continue;
    }
    nextURL = nextURL.replace(match, style === "label" ? `.${encodeURIComponent(value)}` : encodeURIComponent(value));
  }
  return nextURL;
}
function defaultBodySerializer(body, headers) {
  if (body instanceof FormData) {
    return body;
  }
  if (headers) {
    const contentType = headers.get instanceof Function ? headers.get("Content-Type") ?? headers.get("content-type") : headers["Content-Type"] ?? headers["content-type"];
    if (contentType === "application/x-www-form-urlencoded") {
      return new URLSearchParams(body).toString();
    }
  }
  return JSON.stringify(body);
}
function createFinalURL(pathname, options) {
  let finalURL = `${options.baseUrl}${pathname}`;
  if (options.params?.path) {
    finalURL = options.pathSerializer(finalURL, options.params.path);
  }
  let search = options.querySerializer(options.params.query ?? {});
  if (search.startsWith("?")) {
    search = search.substring(1);
  }
  if (search) {
    finalURL += `?${search}`;
  }
  return finalURL;
}
function mergeHeaders(...allHeaders) {
  const finalHeaders = new Headers();
  for (const h2 of allHeaders) {
    if (!h2 || typeof h2 !== "object") {
      continue;
    }
    const iterator = h2 instanceof Headers ? h2.entries() : Object.entries(h2);
    for (const [k, v] of iterator) {
      if (v === null) {
        finalHeaders.delete(k);
      } else if (Array.isArray(v)) {
        for (const v2 of v) {
          finalHeaders.append(k, v2);
        }
      } else if (v !== void 0) {
        finalHeaders.set(k, v);
      }
    }
  }
  return finalHeaders;
}
function removeTrailingSlash(url) {
  if (url.endsWith("/")) {
    return url.substring(0, url.length - 1);
  }
  return url;
}

// ../clients/typescript/src/index.ts
var LoomError = class extends Error {
  status;
  code;
  retryable;
  /** Present on a retryable error: the seconds the server asks to wait (Retry-After). */
  retryAfterS;
  /** The request field a 422 is about. */
  field;
  /** The whole envelope as answered (some codes carry more fields). */
  body;
  constructor(status, body) {
    super(body?.message || `HTTP ${status}`);
    this.name = "LoomError";
    this.status = status;
    this.code = body?.code ?? "";
    this.retryable = body?.retryable ?? false;
    this.retryAfterS = body?.retry_after_s;
    this.field = body?.field;
    this.body = body;
  }
};
var WRITE_METHODS = /* @__PURE__ */ new Set(["POST", "PUT", "PATCH", "DELETE"]);
function createLoomClient(opts) {
  const retries = opts.retries ?? 3;
  const maxDelay = opts.maxRetryDelayMs ?? 1e4;
  const baseFetch = opts.fetch ?? globalThis.fetch;
  const retrying = async (input) => {
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
      const delayMs = Math.min(retryDelayS(response, envelope) * 1e3, maxDelay);
      opts.onRetry?.({ attempt, delayMs, status: response.status, code: envelope.code });
      await response.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  };
  const client2 = createClient({
    baseUrl: opts.baseUrl.replace(/\/+$/, ""),
    fetch: retrying,
    headers: opts.token ? { Authorization: `Bearer ${opts.token}` } : {}
  });
  return Object.assign(client2, { baseUrl: opts.baseUrl });
}
function newIdempotencyKey() {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = b[6] & 15 | 64;
  b[8] = b[8] & 63 | 128;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
async function readEnvelope(response) {
  try {
    const body = await response.json();
    return body?.error;
  } catch {
    return void 0;
  }
}
function retryDelayS(response, envelope) {
  const header = Number(response.headers.get("Retry-After"));
  if (Number.isFinite(header) && header > 0) return header;
  return envelope.retry_after_s ?? 1;
}
async function ok(call) {
  const { data, error, response } = await call;
  if (!response.ok || error !== void 0) {
    const body = error?.error;
    throw new LoomError(response.status, body);
  }
  return data;
}

// src/app.js
var TOKEN_KEY = "loom.console.token";
var LEGS = ["vector", "lexical", "lexical_coverage", "key", "graph", "date", "rerank", "prior", "fused", "relevance"];
var main = document.getElementById("main");
var nav = document.getElementById("nav");
var who = document.getElementById("who");
var confirmDialog = document.getElementById("confirm");
var self = null;
var renderSeq = 0;
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid == null || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}
var client = null;
function loom() {
  const token = sessionStorage.getItem(TOKEN_KEY) || void 0;
  if (!client || client.token !== token) {
    client = { token, api: createLoomClient({ baseUrl: location.origin, token, retries: 3, maxRetryDelayMs: 5e3 }) };
  }
  return client.api;
}
function omitEmpty(query) {
  return Object.fromEntries(Object.entries(query || {}).filter(([, v]) => v != null && v !== ""));
}
async function api(method, path, { params, query, body } = {}) {
  try {
    return await ok(loom()[method](path, { params: { path: params, query: omitEmpty(query) }, body }));
  } catch (err) {
    if (err instanceof LoomError && err.status === 401) signOut("The token was refused (" + err.message + "). Sign in again.");
    throw err;
  }
}
var enc = encodeURIComponent;
var KEY_PATH = "/v1/namespaces/{ns}/memories/{key}";
function identity(m) {
  const q = {};
  for (const f of ["agent", "user_id", "session_id"]) if (m[f] && m[f] !== "-") q[f] = m[f];
  return q;
}
function href(parts, query) {
  const qs = new URLSearchParams(Object.entries(query || {}).filter(([, v]) => v != null && v !== "")).toString();
  return "#/" + parts.map(enc).join("/") + (qs ? "?" + qs : "");
}
var memoryHref = (ns, m) => href(["ns", ns, "m", m.memory_key], identity(m));
function route() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, qs] = raw.split("?");
  return { parts: path ? path.split("/").map(decodeURIComponent) : [], query: new URLSearchParams(qs || "") };
}
function showValue(v) {
  if (v === null || v === void 0) return "";
  return typeof v === "string" ? v : JSON.stringify(v, null, 2);
}
function badge(text, kind) {
  return h("span", { class: "badge" + (kind ? " " + kind : "") }, text);
}
function statusBadge(s) {
  return badge(s, { active: "ok", conflicted: "warn", rejected: "bad", superseded: "warn", duplicate: "warn" }[s]);
}
function errorBox(err) {
  return h(
    "div",
    { class: "error", role: "alert", "data-error-code": err.code || "" },
    err.code ? h("strong", {}, err.code + ": ") : null,
    err.message
  );
}
function fmtNum(x) {
  return typeof x === "number" ? Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(3) : String(x ?? "—");
}
var pendingAnswer = null;
function settleQuestion() {
  if (!pendingAnswer || confirmDialog.open) return;
  const answer = pendingAnswer;
  pendingAnswer = null;
  answer(confirmDialog.returnValue === "ok");
}
confirmDialog.addEventListener("close", settleQuestion);
function confirmAction(text) {
  settleQuestion();
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    pendingAnswer = resolve;
    confirmDialog.returnValue = "cancel";
    confirmDialog.showModal();
    document.getElementById("confirm-cancel").focus();
  });
}
async function whoAmI() {
  try {
    return await api("GET", "/v1/token");
  } catch (err) {
    if (err.status !== 403) throw err;
    const health = await api("GET", "/v1/health");
    if (!health.deployment_id) throw err;
    return { role: "operator", operator: true, org: "", can_write: false, namespaces: [] };
  }
}
function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  self = null;
  if (message) sessionStorage.setItem("loom.console.message", message);
  if (location.hash === "#/signin") render();
  else location.hash = "#/signin";
}
function renderChrome(ns) {
  nav.replaceChildren();
  who.replaceChildren();
  if (!self) return;
  if (self.operator) {
    nav.append(h("a", { href: "#/ops", "data-nav": "ops" }, "Operations"));
  } else {
    nav.append(h("a", { href: "#/" }, "Namespaces"));
  }
  if (ns) {
    nav.append(
      h("a", { href: href(["ns", ns]), "data-nav": "memories" }, "Memories"),
      h("a", { href: href(["ns", ns, "search"]), "data-nav": "search" }, "Search"),
      h("a", { href: href(["ns", ns, "graph"]), "data-nav": "graph" }, "Graph"),
      h("a", { href: href(["ns", ns, "context"]), "data-nav": "context" }, "Context"),
      self.role === "admin" ? h("a", { href: href(["ns", ns, "work"]), "data-nav": "work" }, "Work") : null
    );
  }
  who.append(...[
    self.operator ? null : h("span", { id: "who-org" }, "org ", h("strong", {}, self.org)),
    h("span", { id: "who-role" }, "role ", h("strong", {}, self.role)),
    self.read_user_id ? h("span", {}, "user ", h("strong", {}, self.read_user_id)) : null,
    h("button", { type: "button", id: "signout", onclick: () => signOut() }, "Sign out")
  ].filter(Boolean));
}
function viewSignIn() {
  document.title = "Sign in · Loom console";
  const message = sessionStorage.getItem("loom.console.message");
  sessionStorage.removeItem("loom.console.message");
  const out = h("div", { id: "signin-error" });
  if (message) out.append(h("div", { class: "error", role: "alert" }, message));
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" });
  const form = h(
    "form",
    {
      class: "inline",
      id: "signin",
      onsubmit: async (e) => {
        e.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        try {
          self = await whoAmI();
          if (location.hash === "#/") render();
          else location.hash = "#/";
        } catch (err) {
          sessionStorage.removeItem(TOKEN_KEY);
          out.replaceChildren(errorBox(err));
        }
      }
    },
    h("label", { for: "token" }, "Loom token", input),
    h("button", { class: "primary", type: "submit" }, "Sign in")
  );
  return [
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "Paste a Loom token (loom_…). It stays in this tab only and is sent to this server's API; what you see and may change is what the token may."),
    form,
    out
  ];
}
async function viewNamespaces(seq) {
  document.title = "Namespaces · Loom console";
  const tbody = h("tbody", {});
  const table = h(
    "table",
    { id: "namespaces" },
    h("caption", { class: "muted" }, "By name"),
    h("thead", {}, h("tr", {}, ["Namespace", "Memories", "Conflict policy", "Visibility"].map((c) => h("th", { scope: "col" }, c)))),
    tbody
  );
  const more = h("div", {});
  const status = h("div", { id: "ns-status" });
  async function page(token) {
    let ans;
    try {
      ans = await api("GET", "/v1/namespaces", { query: { limit: 50, page_token: token } });
    } catch (err) {
      if (!token) throw err;
      status.replaceChildren(errorBox(err));
      return;
    }
    if (seq !== renderSeq) return;
    for (const n of ans.namespaces) {
      tbody.append(h(
        "tr",
        { "data-ns": n.namespace, "data-memories": n.memories },
        h("td", {}, h("a", { href: href(["ns", n.namespace]) }, n.namespace)),
        h("td", {}, n.memories_more ? n.memories + "+" : String(n.memories)),
        h("td", {}, n.policy ? n.policy.conflict_policy : h("span", { class: "muted" }, "default")),
        h("td", {}, n.policy ? n.policy.visibility : h("span", { class: "muted" }, "private"))
      ));
    }
    status.replaceChildren(tbody.children.length ? "" : h("p", { class: "muted", id: "no-namespaces" }, "No namespace holds a memory or a policy yet."));
    more.replaceChildren(ans.next_page_token ? h("button", { type: "button", onclick: () => page(ans.next_page_token) }, "More") : "");
  }
  await page("");
  const input = h("input", { id: "open-ns", name: "namespace", required: true });
  const open = h("form", {
    class: "inline",
    id: "open-namespace",
    onsubmit: (e) => {
      e.preventDefault();
      location.hash = href(["ns", input.value.trim()]);
    }
  }, h("label", { for: "open-ns" }, "Namespace", input), h("button", { type: "submit", class: "primary" }, "Open"));
  const scope = self.namespaces ? "the namespaces this token is limited to" : "every namespace";
  return [
    h("h1", {}, "Namespaces"),
    h("p", { class: "muted" }, `Org ${self.org}: ${scope} that holds a memory or a policy.` + (self.read_user_id ? ` Memories counted are user ${self.read_user_id}'s.` : "") + (self.namespaces ? "" : " Open another (a new one) by name.")),
    table,
    status,
    more,
    self.namespaces ? null : open
  ];
}
var FILTERS = [
  ["memory_type", "Type"],
  ["tags", "Tags (comma-separated)"],
  ["status", "Status (comma-separated)"],
  ["user_id", "User"],
  ["session_id", "Session"],
  ["agent", "Agent"]
];
async function viewMemories(ns, query, seq) {
  document.title = ns + " · Loom console";
  const inputs = {};
  const form = h("form", {
    class: "filters",
    id: "filters",
    "aria-label": "Filters",
    onsubmit: (e) => {
      e.preventDefault();
      const q = {};
      for (const [k, el] of Object.entries(inputs)) {
        if (el.type === "checkbox") {
          if (el.checked) q[k] = "true";
        } else if (el.value.trim()) q[k] = el.value.trim();
      }
      location.hash = href(["ns", ns], q);
    }
  });
  for (const [name, label] of FILTERS) {
    inputs[name] = h("input", { id: "f-" + name, name, value: query.get(name) || "" });
    form.append(h("label", { for: "f-" + name }, label, inputs[name]));
  }
  inputs.include_tombstoned = h("input", { id: "f-tomb", type: "checkbox", checked: query.get("include_tombstoned") === "true" });
  form.append(
    h("label", { class: "check", for: "f-tomb" }, inputs.include_tombstoned, "Deleted too"),
    h("button", { type: "submit", class: "primary" }, "Filter")
  );
  const tbody = h("tbody", {});
  const table = h(
    "table",
    { id: "memories" },
    h("caption", { class: "muted" }, "Newest first"),
    h("thead", {}, h("tr", {}, ["Key", "Type", "Status", "Value", "Tags", "User", "Session", "Updated"].map((c) => h("th", { scope: "col" }, c)))),
    tbody
  );
  const more = h("div", {});
  const status = h("div", { id: "list-status" });
  const params = Object.fromEntries(query.entries());
  async function page(token) {
    let ans;
    try {
      ans = await api("GET", "/v1/namespaces/{ns}/memories", { params: { ns }, query: { ...params, limit: 50, page_token: token } });
    } catch (err) {
      if (!token) throw err;
      status.replaceChildren(errorBox(err));
      return;
    }
    if (seq !== renderSeq) return;
    for (const m of ans.memories) {
      tbody.append(h(
        "tr",
        { "data-key": m.memory_key },
        h("td", {}, h("a", { href: memoryHref(ns, m) }, m.memory_key)),
        h("td", {}, m.memory_type),
        h("td", {}, statusBadge(m.status), m.pinned ? badge("pinned") : null, m.locked ? badge("locked") : null, m.tombstone ? badge("deleted", "bad") : null),
        h("td", { class: "value", title: showValue(m.value) }, showValue(m.value)),
        h("td", {}, (m.tags || []).join(", ")),
        h("td", {}, m.user_id),
        h("td", {}, m.session_id),
        h("td", {}, h("time", { datetime: m.updated_at }, m.updated_at.replace("T", " ").slice(0, 19)))
      ));
    }
    status.replaceChildren(tbody.children.length ? "" : h("p", { class: "muted", id: "empty" }, "No memory matches."));
    more.replaceChildren(ans.next_page_token ? h("button", { type: "button", onclick: () => page(ans.next_page_token) }, "More") : "");
  }
  await page("");
  return [h("h1", {}, "Memories of ", h("code", {}, ns)), form, table, status, more];
}
async function viewMemoryByID(id) {
  const m = await api("GET", "/v1/memories/{memory_id}", { params: { memory_id: id } });
  location.replace(memoryHref(m.namespace, m));
  return [];
}
var ACTIONS = [
  // [label, when shown (head, last version), method, confirmation]
  ["Pin", (m) => m && !m.pinned, "pin", "Pin this memory? A pinned memory refuses other values for its key and close writes under other keys."],
  ["Unpin", (m) => m && m.pinned, "unpin", "Unpin this memory?"],
  ["Lock", (m) => m && !m.locked, "lock", "Lock this memory? A locked memory refuses other values, expiry changes and deletes."],
  ["Unlock", (m) => m && m.locked, "unlock", "Unlock this memory?"],
  ["Verify", (m) => m && !m.verified_at, "verify", "Mark this memory verified by your token?"],
  ["Restore", (m, last) => !m && last && last.tombstone || m && ["superseded", "rejected"].includes(m.status), "restore", "Restore this memory to active?"],
  ["Delete", (m) => m, "delete", "Delete this memory? It is tombstoned: history keeps every version and Restore brings it back."]
];
async function viewMemory(ns, key, query, seq) {
  document.title = key + " · " + ns + " · Loom console";
  const ident = Object.fromEntries(["agent", "user_id", "session_id"].filter((f) => query.get(f)).map((f) => [f, query.get(f)]));
  const [head, history] = await Promise.all([
    api("GET", KEY_PATH, { params: { ns, key }, query: ident }).catch((err) => err.status === 404 ? null : Promise.reject(err)),
    api("GET", KEY_PATH + "/history", { params: { ns, key }, query: ident })
  ]);
  if (seq !== renderSeq) return [];
  const versions = history.versions || [];
  const last = versions[versions.length - 1];
  const out = [h("h1", {}, h("code", {}, key), " ", h("span", { class: "muted" }, "in ", h("a", { href: href(["ns", ns]) }, ns)))];
  const notice = h("div", { id: "action-result", "aria-live": "polite" });
  const fields = h("dl", { class: "fields", id: "fields" });
  const field = (k, v) => {
    if (v !== void 0 && v !== null && v !== "") fields.append(h("dt", {}, k), h("dd", {}, v));
  };
  const idLink = (id) => h("a", { href: href(["id", id]) }, h("code", {}, id));
  if (head) {
    field("Status", [statusBadge(head.status), head.pinned ? badge("pinned") : null, head.locked ? badge("locked") : null, head.verified_at ? badge("verified", "ok") : null]);
    field("Type", head.memory_type);
    field("Identity", `agent ${head.agent} · user ${head.user_id} · session ${head.session_id}`);
    field("Version", h("code", {}, head.version_text));
    field("Memory id", h("code", {}, head.memory_id));
    field("Tags", (head.tags || []).join(", "));
    field("Confidence", head.confidence);
    field("Reinforced", head.reinforcement_count);
    field("Actor", head.actor);
    field("Source", head.source_class);
    field("Sensitivity", head.sensitivity);
    field("Superseded by", head.superseded_by ? idLink(head.superseded_by) : null);
    field("Duplicate of", head.duplicate_of ? idLink(head.duplicate_of) : null);
    const conflicts = [].concat(head.conflict_with || []);
    field("Conflicts with", conflicts.length ? conflicts.map((c) => [idLink(String(c)), " "]) : null);
    field("Verified", head.verified_at ? `${head.verified_at} by ${head.verified_by}` : null);
    field("Expires", head.expires_at);
    field("Valid", head.valid_at || head.valid_to ? `${head.valid_at || "…"} – ${head.valid_to || "…"}` : null);
    field("Updated", head.updated_at);
    out.push(fields, h("h2", {}, "Value"), h("pre", { id: "value" }, showValue(head.value)));
  } else {
    out.push(h("p", { class: "notice", id: "no-head" }, last && last.tombstone ? "Deleted: history keeps its versions." : "No live version (deleted or expired)."));
  }
  if (self.can_write) {
    const actions = h("div", { class: "actions", id: "actions", role: "group", "aria-label": "Actions" });
    for (const [label, shown, method, question] of ACTIONS) {
      if (!shown(head, last)) continue;
      actions.append(h("button", {
        type: "button",
        "data-action": method,
        class: method === "delete" ? "danger" : "",
        onclick: async () => {
          if (!await confirmAction(question)) return;
          try {
            if (method === "delete") await api("DELETE", KEY_PATH, { params: { ns, key }, query: ident });
            else await api("POST", KEY_PATH + ":" + method, { params: { ns, key }, body: ident });
            sessionStorage.setItem("loom.console.message", label + ": done.");
            render();
          } catch (err) {
            notice.replaceChildren(errorBox(err));
          }
        }
      }, label));
    }
    out.push(actions);
  }
  const done = sessionStorage.getItem("loom.console.message");
  if (done) {
    sessionStorage.removeItem("loom.console.message");
    notice.append(h("p", { class: "notice" }, done));
  }
  out.push(notice);
  const timeline = h("ol", { class: "timeline", id: "history", "aria-label": "History, oldest first" });
  versions.forEach((v, i) => {
    const cls = v.redacted ? "redacted" : v.tombstone ? "tombstone" : "";
    timeline.append(h(
      "li",
      { class: cls, "data-version": v.version_text, "data-event": v.event },
      h(
        "div",
        {},
        h("strong", {}, `#${i + 1} `),
        h("code", {}, v.event),
        " ",
        statusBadge(v.status),
        v.redacted ? badge("redacted", "bad") : null,
        v.tombstone ? badge("deleted", "bad") : null,
        v.reinforcement_count ? badge("reinforced ×" + v.reinforcement_count) : null
      ),
      h("div", { class: "muted" }, h("time", { datetime: v.updated_at }, v.updated_at), " · ", v.actor, " · seq ", v.seq, " · version ", h("code", {}, v.version_text)),
      v.redacted ? h("p", { class: "muted" }, "Value scrubbed by a redaction.") : h("pre", {}, showValue(v.value)),
      v.tags && v.tags.length ? h("div", { class: "muted" }, "tags: " + v.tags.join(", ")) : null,
      i === versions.length - 1 && head && head.superseded_by ? h("div", {}, "superseded by ", idLink(head.superseded_by)) : null
    ));
  });
  out.push(h("h2", {}, "History"), timeline);
  return out;
}
function legScales(hits) {
  const scale = {};
  for (const hit of hits) for (const [leg, v] of Object.entries(hit.scores || {})) scale[leg] = Math.max(scale[leg] || 1, v);
  return scale;
}
function legBars(scores, scale) {
  const grid = h("div", { class: "legs" });
  for (const leg of LEGS) {
    if (!(leg in scores)) continue;
    const v = scores[leg];
    const fill = h("span", {});
    fill.style.width = Math.max(0, Math.min(1, v / (scale[leg] || 1))) * 100 + "%";
    grid.append(
      h("span", {}, leg),
      h("div", { class: "bar", role: "meter", "aria-label": leg + " score", "aria-valuemin": 0, "aria-valuemax": scale[leg] || 1, "aria-valuenow": v, "data-leg": leg, "data-score": v }, fill),
      h("span", { class: "num" }, fmtNum(v))
    );
  }
  return grid;
}
function searchResult(ns, ans, label) {
  const ex = ans.explain || {};
  const risk = ans.retrieval_risk || {};
  const abstain = ans.verdict !== "ok";
  const box = h("section", { class: "result", "data-mode": ans.mode, "aria-label": label });
  box.append(
    h("h2", {}, label),
    h(
      "div",
      { class: "summary" },
      h("div", { id: "verdict" }, h("span", { class: "muted" }, "Verdict"), h("strong", { "data-verdict": ans.verdict }, ans.verdict), abstain ? badge("abstain", "warn") : badge("answer", "ok")),
      h("div", {}, h("span", { class: "muted" }, "Retrieval risk"), h("strong", { "data-risk": risk.score }, fmtNum(risk.score)), risk.level ? badge(risk.level, { low: "ok", medium: "warn", high: "bad" }[risk.level]) : null),
      h("div", {}, h("span", { class: "muted" }, "Stale dropped"), h("strong", { "data-stale-dropped": ans.stale_dropped }, ans.stale_dropped)),
      h("div", {}, h("span", { class: "muted" }, "Barrier wait"), h("strong", { "data-barrier-ms": ans.barrier?.waited_ms }, (ans.barrier?.waited_ms ?? 0) + " ms")),
      h("div", {}, h("span", { class: "muted" }, "Mode"), h("strong", {}, ans.mode)),
      ex.background ? h("div", {}, h("span", { class: "muted" }, "Background"), h("strong", {}, ex.background.source), `${ex.background.rows ?? 0} rows`) : null
    )
  );
  if (ex.gates && ex.gates.length) {
    box.append(h(
      "table",
      { class: "gates" },
      h("caption", { class: "muted" }, "Gates, in the order the verdict reads them"),
      h("thead", {}, h("tr", {}, ["Gate", "Reading", "Threshold", "Passed", "Source"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, ex.gates.map((g) => h(
        "tr",
        { "data-gate": g.name },
        h("td", {}, g.name),
        h("td", {}, fmtNum(g.value)),
        h("td", {}, fmtNum(g.threshold)),
        h("td", {}, g.passed ? badge("passed", "ok") : badge("failed", "bad")),
        h("td", {}, g.source || "")
      )))
    ));
  }
  if (risk.components) {
    const dl = h("dl", { class: "fields" });
    for (const [k, v] of Object.entries(risk.components)) dl.append(h("dt", {}, k), h("dd", {}, Array.isArray(v) ? v.join(", ") || "—" : typeof v === "number" ? fmtNum(v) : String(v)));
    box.append(h("details", {}, h("summary", {}, "Risk components"), dl));
  }
  const hits = h("ol", { class: "plain hits", "aria-label": "Hits in fused order" });
  const scale = legScales(ans.hits);
  ans.hits.forEach((hit, i) => {
    hits.append(h(
      "li",
      { class: "hit", "data-key": hit.memory_key },
      h(
        "header",
        {},
        h("span", { class: "rank" }, "#" + (i + 1)),
        h("a", { href: memoryHref(ns, hit) }, hit.memory_key),
        h("span", { class: "muted" }, "score " + fmtNum(hit.score)),
        statusBadge(hit.status)
      ),
      h("div", { class: "value" }, showValue(hit.value)),
      legBars(hit.scores || {}, scale)
    ));
  });
  if (!ans.hits.length) hits.append(h("li", { class: "muted" }, "No hits."));
  box.append(
    h("h3", {}, "Hits, in fused order"),
    h("p", { class: "muted" }, "A bar is a leg's score out of 1; lexical (BM25), prior and fused out of the largest on this page."),
    hits
  );
  if (ans.explain) box.append(h("details", {}, h("summary", {}, "Settings and plan (explain)"), h("pre", {}, JSON.stringify({ settings: ex.settings, plan: ex.plan, rerank: ex.rerank }, null, 2))));
  return box;
}
function viewSearch(ns, query) {
  document.title = "Search · " + ns + " · Loom console";
  const q = h("input", { id: "s-query", name: "query", class: "wide", required: true, value: query.get("q") || "" });
  const topK = h("input", { id: "s-topk", type: "number", min: 1, max: 100, value: query.get("top_k") || 10 });
  const select = (id, opts, value) => h("select", { id }, opts.map(([v, l]) => h("option", { value: v, selected: v === value }, l)));
  const mode = select("s-mode", [["weighted", "weighted"], ["rrf", "rrf"]], query.get("mode") || "weighted");
  const recipe = select("s-recipe", [["", "namespace default"], ["precise", "precise"], ["broad", "broad"], ["recent", "recent"]], query.get("recipe") || "");
  const compare = select("s-compare", [["", "nothing"], ["mode:weighted", "mode weighted"], ["mode:rrf", "mode rrf"], ["recipe:precise", "recipe precise"], ["recipe:broad", "recipe broad"], ["recipe:recent", "recipe recent"]], query.get("compare") || "");
  const user = h("input", { id: "s-user", value: query.get("user_id") || "" });
  const type = h("input", { id: "s-type", value: query.get("memory_type") || "" });
  const graph = h("input", { id: "s-graph", type: "checkbox", checked: query.get("graph") === "true" });
  const results = h("div", { id: "results" });
  const form = h(
    "form",
    {
      class: "filters",
      id: "search",
      onsubmit: (e) => {
        e.preventDefault();
        location.hash = href(["ns", ns, "search"], {
          q: q.value,
          top_k: topK.value,
          mode: mode.value,
          recipe: recipe.value,
          compare: compare.value,
          user_id: user.value.trim(),
          memory_type: type.value.trim(),
          graph: graph.checked ? "true" : ""
        });
      }
    },
    h("label", { for: "s-query" }, "Query", q),
    h("label", { for: "s-topk" }, "Top k", topK),
    h("label", { for: "s-mode" }, "Mode", mode),
    h("label", { for: "s-recipe" }, "Recipe", recipe),
    h("label", { for: "s-user" }, "User", user),
    h("label", { for: "s-type" }, "Type", type),
    h("label", { class: "check", for: "s-graph" }, graph, "Graph leg"),
    h("label", { for: "s-compare" }, "Compare with", compare),
    h("button", { type: "submit", class: "primary" }, "Search")
  );
  async function run() {
    const body = { query: query.get("q"), top_k: Number(query.get("top_k") || 10), mode: query.get("mode") || "weighted" };
    if (query.get("recipe")) body.recipe = query.get("recipe");
    if (query.get("user_id")) body.user_id = query.get("user_id");
    if (query.get("memory_type")) body.memory_type = query.get("memory_type");
    if (query.get("graph") === "true") body.graph = true;
    const runs = [[describe(body), body]];
    const [what, value] = (query.get("compare") || "").split(":");
    if (what) {
      const other = { ...body, [what]: value };
      runs.push([describe(other), other]);
    }
    results.className = runs.length > 1 ? "cols" : "";
    try {
      const answers = await Promise.all(runs.map(([, b]) => api("POST", "/v1/namespaces/{ns}/memories:search", { params: { ns }, body: b })));
      results.replaceChildren(...answers.map((a, i) => searchResult(ns, a, runs[i][0])));
    } catch (err) {
      results.replaceChildren(errorBox(err));
    }
  }
  function describe(b) {
    return `mode ${b.mode}` + (b.recipe ? `, recipe ${b.recipe}` : "");
  }
  const out = [h("h1", {}, "Search ", h("code", {}, ns)), form, results];
  if (query.get("q")) return run().then(() => out);
  return out;
}
var SVG_NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...kids) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v != null && v !== false) el.setAttribute(k, String(v));
  for (const kid of kids.flat(Infinity)) if (kid != null && kid !== false) el.append(kid instanceof Node ? kid : String(kid));
  return el;
}
function graphDrawing(ns, ans, query) {
  const W = 960, H = 440, cx = W / 2, cy = H / 2, R = 170;
  const nodes = [
    ...ans.facts.map((f) => ({ kind: "fact", name: f.object, label: f.object, edge: f.predicate, open: f.open, fact: f })),
    ...ans.edges.filter((e) => !ans.facts.some((f) => f.object === e.entity)).map((e) => ({ kind: "edge", name: e.entity, label: e.entity, edge: "", open: e.open, weight: e.weight }))
  ];
  const drawing = svg("svg", {
    class: "graph",
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label": `${ans.name}: ${ans.facts.length} facts, ${ans.edges.length} neighbours (listed in the tables below)`
  });
  const keep = Object.fromEntries(["include_closed", "as_of"].filter((k) => query.get(k)).map((k) => [k, query.get(k)]));
  nodes.forEach((n, i) => {
    const a = 2 * Math.PI * i / Math.max(nodes.length, 1);
    const x = cx + R * 1.6 * Math.cos(a), y = cy + R * Math.sin(a);
    const cls = "g-" + n.kind + (n.open ? "" : " closed");
    drawing.append(svg("line", { x1: cx, y1: cy, x2: x, y2: y, class: cls, "stroke-width": n.weight ? Math.min(1 + n.weight, 8) : 2 }));
    if (n.edge) drawing.append(svg("text", { x: (cx + x) / 2, y: (cy + y) / 2 - 4, class: "g-predicate" + (n.open ? "" : " closed"), "text-anchor": "middle" }, n.edge));
    drawing.append(svg(
      "a",
      { href: href(["ns", ns, "graph", n.name], keep), "data-node": n.name, "data-kind": n.kind, "data-open": String(n.open) },
      svg("circle", { cx: x, cy: y, r: 9, class: cls }),
      svg("text", { x, y: y + 24, "text-anchor": "middle", class: "g-label" }, n.label + (n.open ? "" : " (ended)"))
    ));
  });
  drawing.append(
    svg("circle", { cx, cy, r: 14, class: "g-center" }),
    svg("text", { x: cx, y: cy - 22, "text-anchor": "middle", class: "g-title" }, ans.name + (ans.type ? ` (${ans.type})` : ""))
  );
  return drawing;
}
function spanBar(from, to, lo, hi) {
  const bar = h("div", { class: "span" });
  const fill = h("span", {});
  const a = Date.parse(from), b = to ? Date.parse(to) : hi;
  fill.style.left = (a - lo) / Math.max(hi - lo, 1) * 100 + "%";
  fill.style.width = Math.max((b - a) / Math.max(hi - lo, 1) * 100, 1) + "%";
  if (!to) fill.className = "open";
  bar.append(fill);
  return bar;
}
async function viewGraph(ns, name, query, seq) {
  document.title = (name ? name + " · " : "") + "Graph · " + ns + " · Loom console";
  const input = h("input", { id: "g-name", name: "entity", required: true, value: name });
  const closed = h("input", { id: "g-closed", type: "checkbox", checked: query.get("include_closed") === "true" });
  const asOf = h("input", { id: "g-asof", placeholder: "2026-03-14T09:30:00Z", value: query.get("as_of") || "" });
  const form = h(
    "form",
    {
      class: "filters",
      id: "graph-form",
      onsubmit: (e) => {
        e.preventDefault();
        location.hash = href(["ns", ns, "graph", input.value.trim()], { include_closed: closed.checked ? "true" : "", as_of: asOf.value.trim() });
      }
    },
    h("label", { for: "g-name" }, "Entity", input),
    h("label", { for: "g-asof" }, "As of (RFC 3339)", asOf),
    h("label", { class: "check", for: "g-closed" }, closed, "Ended facts too"),
    h("button", { type: "submit", class: "primary" }, "Show")
  );
  const out = [h("h1", {}, "Entity graph of ", h("code", {}, ns)), form];
  if (!name) return out;
  const ans = await api("GET", "/v1/namespaces/{ns}/graph/entities/{name}", { params: { ns, name }, query: { include_closed: query.get("include_closed"), as_of: query.get("as_of"), edges: 30 } });
  if (seq !== renderSeq) return [];
  out.push(h("p", { class: "muted" }, "Aliases: ", (ans.aliases || []).join(", ") || "—", ans.as_of ? " · as of " + ans.as_of : ""), graphDrawing(ns, ans, query));
  const spans = [...ans.facts, ...ans.edges];
  const lo = Math.min(...spans.map((x) => Date.parse(x.valid_from)), Date.now());
  const hi = Math.max(Date.now(), ...spans.map((x) => x.valid_to ? Date.parse(x.valid_to) : 0));
  const when2 = (f) => `${f.valid_from.slice(0, 19).replace("T", " ")} – ${f.valid_to ? f.valid_to.slice(0, 19).replace("T", " ") : "now"}`;
  out.push(
    h("h2", {}, "Facts"),
    h(
      "table",
      { id: "facts" },
      h("thead", {}, h("tr", {}, ["Predicate", "Object", "State", "Valid", "Over time", "Rows"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, [...ans.facts].sort((a, b) => a.valid_from.localeCompare(b.valid_from)).map((f) => h(
        "tr",
        { "data-object": f.object, "data-open": String(f.open) },
        h("td", {}, f.predicate, " ", h("span", { class: "muted" }, f.cardinality)),
        h("td", {}, h("a", { href: href(["ns", ns, "graph", f.object], { include_closed: query.get("include_closed") }) }, f.object)),
        h("td", {}, f.open ? badge("open", "ok") : badge("ended", "warn"), f.restored ? badge("restored") : null, f.fallback ? badge("fallback") : null),
        h("td", {}, when2(f)),
        h("td", {}, spanBar(f.valid_from, f.valid_to, lo, hi)),
        h("td", {}, (f.rows || []).map((r) => [h("a", { href: memoryHref(ns, r) }, r.memory_key), r.holds ? "" : " (no longer)", " "]))
      )))
    ),
    h("h2", {}, "Neighbours"),
    h(
      "table",
      { id: "edges" },
      h("thead", {}, h("tr", {}, ["Entity", "Weight", "State", "Valid", "Over time"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, ans.edges.map((e) => h(
        "tr",
        { "data-entity": e.entity },
        h("td", {}, h("a", { href: href(["ns", ns, "graph", e.entity]) }, e.entity)),
        h("td", {}, e.weight),
        h("td", {}, e.open ? badge("open", "ok") : badge("ended", "warn")),
        h("td", {}, when2(e)),
        h("td", {}, spanBar(e.valid_from, e.valid_to, lo, hi))
      )))
    )
  );
  return out;
}
function sparkline(id, label, values) {
  const W = 260, H = 48, max = Math.max(1, ...values);
  const drawn = values.length === 1 ? [values[0], values[0]] : values;
  const pts = drawn.map((v, i) => `${i / (drawn.length - 1) * W},${H - v / max * (H - 4) - 2}`).join(" ");
  return h(
    "figure",
    { class: "spark", id },
    h("figcaption", {}, label, " ", h("strong", { "data-value": values[values.length - 1] }, String(values[values.length - 1] ?? "—"))),
    svg(
      "svg",
      { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": `${label}: ${values.join(", ")} (oldest first, largest ${max})` },
      svg("polyline", { points: pts, class: "spark-line" })
    )
  );
}
var opsSamples = [];
var nsSamples = /* @__PURE__ */ new Map();
var OPS_INCLUDE = "postgres,lag,workers,namespaces,erasures,extractions,topic";
var when = (t) => t ? String(t).replace("T", " ").slice(0, 19) : "—";
function detailTable(id, caption, heads, rows, empty) {
  if (rows && rows.error) return h("div", { class: "error", role: "alert", id }, rows.error);
  if (!rows || !rows.length) return h("p", { class: "muted", id }, empty);
  return h(
    "table",
    { id },
    h("caption", { class: "muted" }, caption),
    h("thead", {}, h("tr", {}, heads.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows)
  );
}
function countsList(id, counts) {
  return h("dl", { class: "counts", id }, Object.entries(counts || {}).map(([k, v]) => [h("dt", {}, k), h("dd", { "data-count": k }, String(v))]));
}
async function viewOperations(seq) {
  document.title = "Operations · Loom console";
  const read = () => api("GET", "/v1/health", { query: { include: OPS_INCLUDE } });
  const body = h("div", { id: "ops" });
  const draw = (hl) => {
    const pg = hl.postgres || {}, lag = hl.lag || {}, idx = hl.index || {};
    opsSamples.push({ outbox: pg.outbox_depth ?? 0, parked: pg.parked_deliveries ?? 0, seqs: lag.seqs_behind ?? 0, index: idx.records_behind ?? 0 });
    while (opsSamples.length > 60) opsSamples.shift();
    const series = (k) => opsSamples.map((x) => x[k]);
    const listed = hl.namespaces && hl.namespaces.listed || [];
    for (const n of listed) {
      const k = n.org + "/" + n.namespace;
      const xs = nsSamples.get(k) || [];
      xs.push({ p: n.projection_behind, i: n.index_behind ?? 0 });
      while (xs.length > 60) xs.shift();
      nsSamples.set(k, xs);
    }
    const relay = pg.relay || {};
    body.replaceChildren(
      h(
        "dl",
        { class: "fields", id: "deployment" },
        h("dt", {}, "Deployment"),
        h("dd", { id: "ops-deployment" }, h("code", {}, hl.deployment_id)),
        h("dt", {}, "Version"),
        h("dd", {}, hl.version),
        h("dt", {}, "Roles"),
        h("dd", {}, (hl.roles || []).join(", ")),
        h("dt", {}, "Projection"),
        h("dd", {}, hl.projection),
        h("dt", {}, "Topic"),
        h("dd", {}, hl.topic),
        h("dt", {}, "Search index"),
        h("dd", {}, hl.search_index, idx.warm !== void 0 ? [" · ", idx.warm ? badge("warm", "ok") : badge(`warming ${fmtNum(idx.warm_percent)}%`, "warn"), ` · ${idx.entries ?? 0} entries in ${idx.namespaces_held ?? 0} namespaces`] : ""),
        h("dt", {}, "Durability"),
        h("dd", {}, pg.durability || pg.error || ""),
        h("dt", {}, "Pending migrations"),
        h("dd", {}, (hl.pending_migrations || []).join(", ") || "none")
      ),
      h("h2", {}, "Relay and outbox"),
      h(
        "div",
        { class: "sparks" },
        sparkline("ops-outbox", "Outbox depth", series("outbox")),
        sparkline("ops-parked", "Parked deliveries", series("parked")),
        sparkline("ops-lag", "Projection seqs behind", series("seqs")),
        sparkline("ops-index", "Index records behind", series("index"))
      ),
      h("p", { class: "muted" }, `Oldest unpublished: ${fmtNum(pg.oldest_unpublished_age_s ?? 0)} s · held for the standbys: ${relay.held_rows ?? 0}${relay.reason ? " (" + relay.reason + ")" : ""} · namespaces behind: ${lag.namespaces_behind ?? 0} · read every 5 s, the last ${opsSamples.length} readings drawn.`),
      h("h2", {}, "Lag per namespace"),
      detailTable(
        "ns-lag",
        `${listed.length} of ${hl.namespaces?.total ?? 0} namespaces: those behind first, then the most recently written; seqs behind the generation, the last readings drawn`,
        ["Org", "Namespace", "Generation", "Projection", "Behind", "Index", "Behind", "Over time"],
        hl.namespaces && hl.namespaces.error ? hl.namespaces : listed.map((n) => {
          const xs = nsSamples.get(n.org + "/" + n.namespace) || [];
          return h(
            "tr",
            { "data-ns": n.namespace, "data-org": n.org, "data-projection-behind": n.projection_behind, "data-index-behind": n.index_behind ?? "" },
            h("td", {}, n.org),
            h("td", {}, n.namespace),
            h("td", {}, n.generation),
            h("td", {}, n.watermark),
            h("td", {}, n.projection_behind ? badge(String(n.projection_behind), "warn") : "0"),
            h("td", {}, n.index_position ?? "—", n.index_held === false ? [" ", badge("evicted", "warn")] : ""),
            h("td", {}, n.index_behind ? badge(String(n.index_behind), "warn") : n.index_behind ?? "—"),
            h("td", {}, miniSpark(`${n.org}/${n.namespace} seqs behind`, xs.map((x) => x.p + x.i)))
          );
        }),
        "No namespace yet."
      ),
      h("h2", {}, "Worker passes and queues"),
      detailTable(
        "passes",
        "Background passes of this process",
        ["Pass", "Enabled", "Last run", "Rows done", "Rows owed", "Failures"],
        Object.entries(hl.passes || {}).map(([name, ps]) => h(
          "tr",
          { "data-pass": name },
          h("td", {}, name),
          h("td", {}, ps.enabled ? badge("on", "ok") : badge("off")),
          h("td", {}, when(ps.last_run)),
          h("td", {}, ps.rows_done),
          h("td", {}, ps.rows_owed),
          h("td", {}, ps.failures ? badge(String(ps.failures), "bad") : "0")
        )),
        "This process runs no worker pass."
      ),
      detailTable(
        "queues",
        "Work queues of the deployment",
        ["Worker", "Owed", "Done", "Failures", "Last done"],
        hl.workers && hl.workers.error ? hl.workers : Object.entries(hl.workers || {}).map(([name, q]) => h(
          "tr",
          { "data-worker": name },
          h("td", {}, name),
          h("td", {}, q.owed),
          h("td", {}, q.done),
          h("td", {}, q.failures ? badge(String(q.failures), "bad") : "0"),
          h("td", {}, when(q.last_done_at))
        )),
        "No worker queue."
      ),
      h("h2", {}, "Extraction queue"),
      hl.extractions && hl.extractions.error ? h("div", { class: "error", role: "alert" }, hl.extractions.error) : h(
        "div",
        { id: "extractions" },
        countsList("extractions-by-status", hl.extractions?.by_status),
        h("p", { class: "muted" }, `Oldest owed: ${hl.extractions?.oldest_owed_at ? when(hl.extractions.oldest_owed_at) + ` (${fmtNum(hl.extractions.oldest_owed_age_s)} s)` : "none"} · orgs owing: ${hl.extractions?.orgs_owing ?? 0}`)
      ),
      h("h2", {}, "Erasures"),
      hl.erasures && hl.erasures.error ? h("div", { class: "error", role: "alert" }, hl.erasures.error) : countsList("erasures-by-status", hl.erasures?.by_status),
      detailTable(
        "erasures",
        "The latest, newest first: the census counts every counted table over the scope (a residue re-opens its step)",
        ["Requested", "Org", "Kind", "Namespaces", "Status", "Runs", "Residue", "Census", "Finished"],
        (hl.erasures?.latest || []).map((e) => h(
          "tr",
          { "data-erasure": e.id, "data-status": e.status },
          h("td", {}, when(e.requested_at)),
          h("td", {}, e.org),
          h("td", {}, e.kind, e.purge ? " (purge)" : ""),
          h("td", {}, e.namespaces),
          h("td", {}, badge(e.status, { completed: "ok", running: "warn", failed: "bad" }[e.status]), e.errored ? [" ", badge("errored", "bad")] : ""),
          h("td", {}, e.attempts),
          h("td", { "data-residue": e.residue_count ?? "" }, e.residue_count == null ? "—" : e.residue_count ? badge(String(e.residue_count), "bad") : badge("0", "ok")),
          h("td", {}, e.census ? h(
            "details",
            {},
            h("summary", {}, `${Object.keys(e.census).length} tables`),
            countsList("", e.census)
          ) : "—"),
          h("td", {}, when(e.finished_at))
        )),
        "No erasure yet."
      ),
      h("h2", {}, "The change topic's latest records"),
      detailTable(
        "topic",
        "Newest first: each record's envelope; its content stays sealed and is not opened here",
        ["Committed", "Type", "Org", "Namespace", "Seq", "Partition/offset", "Bytes", "Content"],
        Array.isArray(hl.topic_latest) ? hl.topic_latest.map((r) => h(
          "tr",
          { "data-type": r.type || "", "data-ns": r.namespace || "", "data-sealed": String(r.sealed) },
          h("td", {}, when(r.committed_at || r.timestamp)),
          h("td", {}, r.undecodable ? badge("undecodable", "bad") : h("code", {}, r.type)),
          h("td", {}, r.org),
          h("td", {}, r.namespace),
          h("td", {}, r.seq),
          h("td", {}, `${r.partition}/${r.offset}`),
          h("td", {}, r.bytes),
          h("td", {}, r.sealed ? badge("sealed") : h("span", { class: "muted" }, "none"))
        )) : hl.topic_latest,
        "The topic holds no record yet."
      )
    );
  };
  draw(await read());
  const tick = async () => {
    if (seq !== renderSeq || !self) return;
    try {
      draw(await read());
    } catch (err) {
      body.prepend(errorBox(err));
    }
    setTimeout(tick, 5e3);
  };
  setTimeout(tick, 5e3);
  return [h("h1", {}, "Operations"), h("p", { class: "muted" }, "The deployment as health reports it to the operator's token (GET /v1/health?include=" + OPS_INCLUDE + "). Org tokens see their org's memory instead."), body];
}
function miniSpark(label, values) {
  const W = 120, H = 20, max = Math.max(1, ...values);
  const drawn = values.length < 2 ? [values[0] ?? 0, values[0] ?? 0] : values;
  const pts = drawn.map((v, i) => `${i / (drawn.length - 1) * W},${H - v / max * (H - 2) - 1}`).join(" ");
  return svg(
    "svg",
    { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "mini", role: "img", "aria-label": `${label}: ${values.join(", ")}` },
    svg("polyline", { points: pts, class: "spark-line" })
  );
}
var AUDIT_PAGES = 5;
var ERASURES_READ = 20;
async function erasureIDs(ns) {
  const ids = [];
  let after = 0;
  for (let page = 0; page < AUDIT_PAGES; page++) {
    const ans = await api("GET", "/v1/namespaces/{ns}/audit", { params: { ns }, query: { after_seq: after, limit: 1e3 } });
    for (const r of ans.rows) if (r.op === "erasure.request" && r.request_id && !ids.includes(r.request_id)) ids.push(r.request_id);
    if (ans.next_after_seq == null) return { ids, complete: true };
    after = ans.next_after_seq;
  }
  return { ids, complete: false };
}
var sagaKind = { completed: "ok", running: "warn", failed: "bad" };
var extractionKind = { done: "ok", pending: "warn", running: "warn", held: "warn", failed: "bad" };
async function viewWork(ns) {
  document.title = "Work · " + ns + " · Loom console";
  const settle = (p) => p.then((v) => ({ v }), (err) => ({ err }));
  const [ext, found] = await Promise.all([
    settle(api("GET", "/v1/namespaces/{ns}/extractions", { params: { ns }, query: { limit: 100 } })),
    settle(erasureIDs(ns))
  ]);
  const newest = found.v ? found.v.ids.slice(-ERASURES_READ).reverse() : [];
  const sagas = await Promise.all(newest.map((id) => settle(api("GET", "/v1/erasures/{erasure_id}", { params: { erasure_id: id } }))));
  const requests = ext.v ? ext.v.requests || [] : [];
  const byStatus = { pending: 0, running: 0, held: 0, done: 0, failed: 0 };
  for (const r of requests) byStatus[r.status] = (byStatus[r.status] || 0) + 1;
  const extractions = ext.err ? h("div", { id: "work-extractions" }, errorBox(ext.err)) : h(
    "div",
    { id: "work-extractions" },
    countsList("work-extractions-by-status", byStatus),
    detailTable(
      "work-extraction-list",
      "Newest first: each deferred memory.set_from_messages request of the namespace",
      ["Created", "Status", "User", "Session", "Agent", "Messages", "Attempts", "Finished", "Last error"],
      requests.map((r) => h(
        "tr",
        { "data-queue-id": r.queue_id, "data-status": r.status },
        h("td", {}, when(r.created_at)),
        h("td", {}, badge(r.status, extractionKind[r.status])),
        h("td", {}, r.user_id || ""),
        h("td", {}, r.session_id || ""),
        h("td", {}, r.agent || ""),
        h("td", {}, r.messages ?? ""),
        h("td", {}, r.attempts ?? 0),
        h("td", {}, when(r.finished_at)),
        h("td", { class: "value", title: r.last_error || "" }, r.last_error || "")
      )),
      "No deferred extraction in this namespace."
    )
  );
  const erasures = found.err ? h("div", { id: "work-erasures" }, errorBox(found.err)) : detailTable(
    "work-erasures",
    `The latest ${newest.length} of ${found.v.ids.length} erasures the audit trail names` + (found.v.complete ? "" : ` in its first ${AUDIT_PAGES * 1e3} rows`) + ", newest first; the census counts every counted table over the scope",
    ["Requested", "Kind", "User", "Status", "Steps", "Runs", "Residue", "Census", "Finished"],
    sagas.map((s, i) => s.err ? h("tr", { "data-erasure": newest[i] }, h("td", { colspan: 9 }, errorBox(s.err))) : h(
      "tr",
      { "data-erasure": s.v.id, "data-status": s.v.status },
      h("td", {}, when(s.v.requested_at)),
      h("td", {}, s.v.scope.kind, s.v.purge ? " (purge)" : ""),
      h("td", {}, s.v.scope.user_id || ""),
      h("td", {}, badge(s.v.status, sagaKind[s.v.status]), s.v.last_error ? [" ", badge("errored", "bad")] : ""),
      h("td", {}, `${(s.v.steps || []).filter((st) => st.completed_at).length} of ${(s.v.steps || []).length}`),
      h("td", {}, s.v.attempts),
      h("td", { "data-residue": s.v.residue_count ?? "" }, s.v.residue_count == null ? "—" : s.v.residue_count ? badge(String(s.v.residue_count), "bad") : badge("0", "ok")),
      h("td", {}, s.v.census ? h("details", {}, h("summary", {}, `${Object.keys(s.v.census).length} tables`), countsList("", s.v.census)) : "—"),
      h("td", {}, when(s.v.finished_at))
    )),
    "No erasure in this namespace."
  );
  return [
    h("h1", {}, "Work in ", h("code", {}, ns)),
    h("p", { class: "muted" }, `Org ${self.org}'s background work in this namespace, as its admin reads it: the deferred extractions (GET …/extractions) and the erasures (the audit trail's, each by GET /v1/erasures/{id}). The operator's token sees the whole deployment's.`),
    h("h2", {}, "Extraction queue"),
    extractions,
    h("h2", {}, "Erasures"),
    erasures
  ];
}
function fillTo(el, share) {
  el.style.width = Math.min(Math.max(share, 0), 1) * 100 + "%";
  return el;
}
var PACK_SECTIONS = ["profile", "facts", "recent", "session", "knowledge"];
function citeLink(cite) {
  const m = /^m:([0-9a-f-]+)@(\d+)$/.exec(cite);
  return m ? h("a", { href: href(["id", m[1]]), "data-cite": cite }, h("code", {}, cite)) : h("code", { "data-cite": cite }, cite);
}
async function viewContext(ns, query) {
  document.title = "Context · " + ns + " · Loom console";
  const q = h("input", { id: "c-query", name: "q", value: query.get("q") || "", size: 40 });
  const user = h("input", { id: "c-user", value: query.get("user_id") || "" });
  const session = h("input", { id: "c-session", value: query.get("session_id") || "" });
  const budget = h("input", { id: "c-budget", type: "number", min: 16, max: 2e5, value: query.get("budget") || "500" });
  const model = h("input", { id: "c-model", placeholder: "gpt-4o", value: query.get("model") || "" });
  const chosen = (query.get("sections") || "").split(",").filter(Boolean);
  const boxes = PACK_SECTIONS.map((name) => h("input", { id: "c-sec-" + name, type: "checkbox", value: name, checked: chosen.includes(name) }));
  const form = h(
    "form",
    {
      class: "filters",
      id: "context-form",
      onsubmit: (e) => {
        e.preventDefault();
        location.hash = href(["ns", ns, "context"], {
          q: q.value,
          user_id: user.value.trim(),
          session_id: session.value.trim(),
          budget: budget.value,
          model: model.value.trim(),
          sections: boxes.filter((b) => b.checked).map((b) => b.value).join(","),
          run: "1"
        });
      }
    },
    h("label", { for: "c-query" }, "Query", q),
    h("label", { for: "c-user" }, "User", user),
    h("label", { for: "c-session" }, "Session", session),
    h("label", { for: "c-budget" }, "Budget (tokens)", budget),
    h("label", { for: "c-model" }, "Model", model),
    h(
      "fieldset",
      { class: "sections" },
      h("legend", {}, "Sections (none: the default)"),
      PACK_SECTIONS.map((name, i) => h("label", { class: "check", for: "c-sec-" + name }, boxes[i], name))
    ),
    h("button", { type: "submit", class: "primary" }, "Pack")
  );
  const out = [
    h("h1", {}, "Agent context of ", h("code", {}, ns)),
    h("p", { class: "muted" }, "The block context.pack answers for a system prompt (POST …/context:pack), cut to the budget, every line cited."),
    form
  ];
  if (!query.get("run")) return out;
  const reqBody = { budget_tokens: Number(query.get("budget") || 500) };
  for (const [k, f] of [["query", "q"], ["user_id", "user_id"], ["session_id", "session_id"], ["model", "model"]]) if (query.get(f)) reqBody[k] = query.get(f);
  if (chosen.length) reqBody.sections = chosen;
  let ans;
  try {
    ans = await api("POST", "/v1/namespaces/{ns}/context:pack", { params: { ns }, body: reqBody });
  } catch (err) {
    out.push(errorBox(err));
    return out;
  }
  const share = ans.tokens / Math.max(ans.budget_tokens, 1);
  const profile = reqBody.user_id ? await userProfile(ns, reqBody.user_id) : null;
  out.push(h(
    "section",
    { id: "pack", "aria-label": "The pack" },
    h(
      "div",
      { class: "summary" },
      h("div", {}, h("span", { class: "muted" }, "Tokens"), h("strong", { id: "pack-tokens", "data-tokens": ans.tokens, "data-budget": ans.budget_tokens }, `${ans.tokens} of ${ans.budget_tokens}`)),
      h("div", {}, h("span", { class: "muted" }, "Tokenizer"), h("strong", {}, ans.tokenizer.encoding + (ans.tokenizer.approximate ? " (approximate)" : ""))),
      h("div", {}, h("span", { class: "muted" }, "Priority"), h("strong", {}, ans.priority.join(" › "))),
      h("div", {}, h("span", { class: "muted" }, "Cut"), h("strong", { "data-cut": ans.cut.length }, String(ans.cut.length)))
    ),
    h(
      "div",
      { class: "bar budget", role: "meter", "aria-label": "Budget used", "aria-valuemin": 0, "aria-valuemax": ans.budget_tokens, "aria-valuenow": ans.tokens },
      fillTo(h("span", {}), share)
    ),
    ans.sections.map((sec) => h(
      "div",
      { class: "pack-section", "data-section": sec.name },
      h("h2", {}, sec.name, " ", sec.available ? null : badge("unavailable", "warn"), h("span", { class: "muted" }, ` ${sec.lines.length} lines`)),
      sec.note ? h("p", { class: "muted" }, sec.note) : null,
      sec.lines.length ? h(
        "table",
        {},
        h("thead", {}, h("tr", {}, ["Citation", "Line", "Tokens"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, sec.lines.map((l) => h("tr", { "data-cite": l.cite }, h("td", {}, citeLink(l.cite)), h("td", {}, l.text), h("td", {}, l.tokens))))
      ) : null
    )),
    ans.cut.length ? [h("h2", {}, "Cut"), h(
      "table",
      { id: "pack-cut" },
      h("thead", {}, h("tr", {}, ["Section", "Citation", "Reason", "Tokens"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, ans.cut.map((c) => h("tr", { "data-reason": c.reason }, h("td", {}, c.section), h("td", {}, citeLink(c.cite)), h("td", {}, c.reason), h("td", {}, c.tokens))))
    )] : null,
    h("h2", {}, "Citations"),
    h("ol", { id: "pack-citations", "data-count": ans.citations.length }, ans.citations.map((c) => h("li", {}, citeLink(c)))),
    h("h2", {}, "The block"),
    h("pre", { id: "pack-block" }, ans.block)
  ));
  if (profile) out.push(profile);
  return out;
}
async function userProfile(ns, userID) {
  let r;
  try {
    r = await api("GET", "/v1/namespaces/{ns}/profiles/{user_id}/render", { params: { ns, user_id: userID }, query: { format: "markdown" } });
  } catch (err) {
    if (err.status !== 404) return h("section", { id: "profile", "aria-label": "Profile" }, h("h2", {}, "Profile of ", h("code", {}, userID)), errorBox(err));
    return h(
      "section",
      { id: "profile", "aria-label": "Profile", "data-citations": 0 },
      h("h2", {}, "Profile of ", h("code", {}, userID)),
      h("p", { class: "muted" }, "This user has no profile: no structured profile, and no profile section (the namespace does not opt in to profile_consolidation, or its pass has not built one).")
    );
  }
  return h(
    "section",
    { id: "profile", "aria-label": "Profile", "data-citations": r.citations.length },
    h(
      "h2",
      {},
      "Profile of ",
      h("code", {}, userID),
      r.citations.some((c) => c.includes("/profile_section:")) ? [" ", badge("profile section", "ok")] : null
    ),
    h("pre", { id: "profile-text" }, r.text),
    h("ol", { id: "profile-citations" }, r.citations.map((c) => h("li", {}, h("code", { "data-cite": c }, c))))
  );
}
async function render() {
  const seq = ++renderSeq;
  const { parts, query } = route();
  if (!sessionStorage.getItem(TOKEN_KEY)) {
    renderChrome();
    main.replaceChildren(...viewSignIn());
    main.dataset.view = "signin";
    main.dataset.ready = String(seq);
    return;
  }
  let content;
  try {
    if (!self) self = await whoAmI();
    const ns = parts[0] === "ns" ? parts[1] : "";
    renderChrome(ns);
    if (parts[0] === "signin") content = viewSignIn();
    else if (self.operator) content = await viewOperations(seq);
    else if (parts[0] === "id" && parts[1]) content = await viewMemoryByID(parts[1]);
    else if (ns && parts[2] === "m" && parts[3] !== void 0) content = await viewMemory(ns, parts[3], query, seq);
    else if (ns && parts[2] === "search") content = await viewSearch(ns, query);
    else if (ns && parts[2] === "graph") content = await viewGraph(ns, parts[3] || "", query, seq);
    else if (ns && parts[2] === "context") content = await viewContext(ns, query);
    else if (ns && parts[2] === "work") content = await viewWork(ns);
    else if (ns) content = await viewMemories(ns, query, seq);
    else content = await viewNamespaces(seq);
  } catch (err) {
    if (!sessionStorage.getItem(TOKEN_KEY)) return;
    content = [
      h("h1", {}, err.status === 404 ? "Not found" : "Error"),
      errorBox(err),
      err.status === 404 ? h("p", { class: "muted" }, "Nothing this token can reach is at this address.") : null
    ];
  }
  if (seq !== renderSeq) return;
  main.replaceChildren(...content);
  main.dataset.view = self && self.operator ? "ops" : parts[0] === "ns" ? parts[2] || "memories" : parts[0] || "namespaces";
  main.dataset.ready = String(seq);
  main.focus({ preventScroll: true });
}
window.addEventListener("hashchange", render);
render();
