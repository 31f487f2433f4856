/** Effects outside the cluster (contract 0.4.0): the requests a plan carries, and the answers
 * the next decisions observe. Each of `OutboundRequest`, `Answer` and `Response` is both a type
 * (the plain data, as the host sends it) and a value of the same name holding its helpers:
 * `OutboundRequest.post(key, url)` and the rest of {@link RequestBuilder}, `Answer.success(a)`,
 * `Response.json<T>(r)`. */

import { ReconcileFailed } from "./types.js";

/** One HTTP header. */
export interface Header {
  name: string;
  value: string;
}

/** A header the host fills from a Secret the plugin never sees. */
export interface Credential {
  /** The header's name, e.g. `Authorization`. */
  header: string;
  /** Text before the secret value, e.g. `Bearer `; absent: none. */
  prefix?: string;
  /** The Secret, in the primary's namespace; the plugin needs `get` on Secrets. */
  secret: string;
  /** Its key. */
  key: string;
}

/** The methods a request may use. */
export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** A request to a host outside the cluster, sent by the host after the plan's writes. Its
 * answer comes back in `observed.answers` under its key; while one is held, a request with
 * the same key is not sent again. */
export interface OutboundRequest {
  /** The plugin's key for it; a plan that no longer carries the key lets its answer go. */
  key: string;
  method: Method;
  /** An absolute URL on a host the plugin declared in `outboundHosts`. */
  url: string;
  /** Headers to send. */
  headers?: Header[];
  /** The body; a string is sent as UTF-8. */
  body?: Uint8Array | string;
  /** A header filled from a Secret. */
  credential?: Credential;
  /** Sent as `Idempotency-Key`. */
  idempotencyKey?: string;
  /** Whether the host may send it again after a failure (with backoff). */
  retry?: boolean;
  /** The response headers the answer keeps, by name. */
  keepHeaders?: string[];
}

/** A response from outside the cluster. */
export interface Response {
  /** The HTTP status. */
  status: number;
  /** The headers asked for in `keepHeaders`. */
  headers: Header[];
  /** The body, at most the host's cap. */
  body: Uint8Array;
  /** Whether the body was cut at the cap. */
  truncated: boolean;
}

/** What came of a request: a response, a refusal by the host (the rule that refused it), or
 * a failure (timeout, connection, TLS). */
export type Outcome = { response: Response } | { refused: string } | { failed: string };

/** The answer to a request, under its key. */
export interface Answer {
  key: string;
  outcome: Outcome;
  /** When it came, milliseconds since the Unix epoch. */
  atUnixMs: number;
}

/** A request built step by step, as a {@link Plan} is (each step changes the request and
 * returns it); made by `OutboundRequest.new`, `.get`, `.post`, `.put` and `.delete`:
 *
 * ```ts
 * OutboundRequest.post("create", `${api}/records`).json(record).setIdempotencyKey(`${uid}-create`).setRetry()
 * ```
 *
 * It is an {@link OutboundRequest}: `Plan.request` takes it as it is. The steps that set a
 * member of the same name are `setIdempotencyKey`, `setRetry` and `setCredential`, as
 * `Plan.setStatus` sets `status`. */
export class RequestBuilder implements OutboundRequest {
  method: Method;
  headers: Header[] = [];
  body?: Uint8Array | string;
  credential?: Credential;
  idempotencyKey?: string;
  retry = false;
  keepHeaders: string[] = [];

  /** A request under `key`: `method` (in any case; sent uppercase) to `url`. */
  constructor(
    public key: string,
    method: Method | Lowercase<Method>,
    public url: string,
  ) {
    this.method = method.toUpperCase() as Method;
  }

  /** Adds a header. */
  header(name: string, value: string): this {
    this.headers.push({ name, value });
    return this;
  }

  /** `value` as the body, JSON in UTF-8, with `content-type: application/json` (replacing a
   * Content-Type added before). Throws a `TypeError` for a value with no JSON form
   * (`undefined`, a function). */
  json(value: unknown): this {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError(`request ${this.key}: ${String(value)} has no JSON form`);
    this.body = new TextEncoder().encode(text);
    this.headers = this.headers.filter((h) => h.name.toLowerCase() !== "content-type");
    return this.header("content-type", "application/json");
  }

  /** Sends `key` as `Idempotency-Key`, for an API that honours it. */
  setIdempotencyKey(key: string): this {
    this.idempotencyKey = key;
    return this;
  }

  /** Lets the host send it again after a failure, a 429 or a 5xx (with backoff). */
  setRetry(retry = true): this {
    this.retry = retry;
    return this;
  }

  /** Keeps the response header `name` in the answer (the others are dropped). */
  keepHeader(name: string): this {
    this.keepHeaders.push(name);
    return this;
  }

  /** Fills `header` from key `key` of Secret `secret` (the primary's namespace), after
   * `prefix`: `.setCredential("Authorization", "Bearer ", "dns-token", "token")`. The plugin
   * never sees the value. */
  setCredential(header: string, prefix: string, secret: string, key: string): this {
    this.credential = { header, prefix, secret, key };
    return this;
  }
}

/** Makes requests (the type {@link OutboundRequest} is the interface above):
 * `OutboundRequest.post("create", url).json(record).setRetry()`. */
export const OutboundRequest = {
  /** A request under `key`: `method` (in any case; sent uppercase) to `url`. */
  new(key: string, method: Method | Lowercase<Method>, url: string): RequestBuilder {
    return new RequestBuilder(key, method, url);
  },
  /** `GET url` under `key`. */
  get(key: string, url: string): RequestBuilder {
    return new RequestBuilder(key, "GET", url);
  },
  /** `POST url` under `key`. */
  post(key: string, url: string): RequestBuilder {
    return new RequestBuilder(key, "POST", url);
  },
  /** `PUT url` under `key`. */
  put(key: string, url: string): RequestBuilder {
    return new RequestBuilder(key, "PUT", url);
  },
  /** `DELETE url` under `key`. */
  delete(key: string, url: string): RequestBuilder {
    return new RequestBuilder(key, "DELETE", url);
  },
};

/** Reads answers (the type {@link Answer} is the interface above):
 * `Answer.success(observed.answer("create"))`. Each takes `undefined` (no answer yet) too. */
export const Answer = {
  /** The response, when one came (any status). */
  response(answer: Answer | undefined): Response | undefined {
    return answer && "response" in answer.outcome ? answer.outcome.response : undefined;
  },
  /** The response, when one came with a 2xx status. */
  success(answer: Answer | undefined): Response | undefined {
    const r = Answer.response(answer);
    return r && r.status >= 200 && r.status < 300 ? r : undefined;
  },
  /** The rule that refused it, when the host refused to send it. */
  refused(answer: Answer | undefined): string | undefined {
    return answer && "refused" in answer.outcome ? answer.outcome.refused : undefined;
  },
  /** Whether asking again may help: it failed (timeout, connection, TLS) or the answer was
   * 429 or 5xx. A refusal or a 4xx stays as it is until the request changes; no answer is
   * not retryable. */
  retryable(answer: Answer | undefined): boolean {
    if (!answer) return false;
    const o = answer.outcome;
    if ("failed" in o) return true;
    return "response" in o && (o.response.status === 429 || o.response.status >= 500);
  },
};

/** Reads responses (the type {@link Response} is the interface above):
 * `Response.json<Created>(r).id`, `Response.header(r, "etag")`. */
export const Response = {
  /** The body parsed as JSON (typed as `T`, unchecked); throws {@link ReconcileFailed} when it
   * is not JSON (a body cut at the cap seldom is). */
  json<T = unknown>(response: Response): T {
    try {
      return JSON.parse(Response.text(response)) as T;
    } catch (e) {
      throw new ReconcileFailed(`the answer's body: ${e instanceof Error ? e.message : e}`);
    }
  },
  /** The body as text (UTF-8; what does not decode is replaced with U+FFFD). */
  text(response: Response): string {
    return new TextDecoder().decode(response.body);
  },
  /** The value of the first kept header named `name` (any case), if any. */
  header(response: Response, name: string): string | undefined {
    const lower = name.toLowerCase();
    return response.headers.find((h) => h.name.toLowerCase() === lower)?.value;
  },
};
