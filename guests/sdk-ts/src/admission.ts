/** Admission and conversion (contract 0.4.0): what `validate` is asked and answers, and how
 * `default` and `convert` refuse. */

import type { K8sObject } from "./types.js";

/** The operation an admission request is about (Kubernetes' wording). */
export type Operation = "CREATE" | "UPDATE" | "DELETE";

/** A create, update or delete of an object of the primary kind, to be allowed or not. */
export interface AdmissionRequest {
  operation: Operation;
  /** The object as it would be stored; absent on delete. */
  object?: K8sObject;
  /** The object before, on update and delete. */
  oldObject?: K8sObject;
  /** The user asking. */
  user: string;
  /** Whether nothing will be stored (`kubectl apply --dry-run=server`). */
  dryRun: boolean;
}

/** What is wrong with one field. */
export interface FieldError {
  /** The field's path, e.g. `spec.schedule`. */
  path: string;
  /** The value refused (any JSON value); absent to leave it out of the message. */
  value?: unknown;
  /** Why. */
  detail: string;
}

/** The answer of `validate`: `Verdict.allow()`, `Verdict.deny(message)` or
 * `Verdict.invalid([{ path, value, detail }])`, with warnings added by `warn`. */
export class Verdict {
  /** For a refusal: what is wrong with which field. */
  fields: FieldError[] = [];
  /** For a refusal with no field to blame: the message. */
  message?: string;
  /** Warnings shown to the client, allowed or not. */
  warnings: string[] = [];

  /** Whether the operation may go on. */
  constructor(public allowed: boolean) {}

  /** Allowed, with no warning. */
  static allow(): Verdict {
    return new Verdict(true);
  }

  /** Refused with a message. */
  static deny(message: string): Verdict {
    const v = new Verdict(false);
    v.message = message;
    return v;
  }

  /** Refused for these fields (the host words it as the API server words an invalid object). */
  static invalid(fields: FieldError[]): Verdict {
    const v = new Verdict(false);
    v.fields = fields;
    return v;
  }

  /** Adds a warning. */
  warn(warning: string): this {
    this.warnings.push(warning);
    return this;
  }
}

/** Thrown by `default` or `convert`: the operation is refused with this message. */
export class Refused extends Error {}
