/** Effects outside the cluster (contract 0.4.0): the requests a plan carries, and the answers
 * the next decisions observe. */

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
