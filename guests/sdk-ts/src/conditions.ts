/** Status conditions following Kubernetes conventions, with transition times that only move
 * when the condition's status changes (an unchanged world yields an unchanged status). */

/** A status condition. */
export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

/** Builds a condition (`observedGeneration` only when `generation` is known). */
export function condition(
  type: string,
  ok: boolean,
  reason: string,
  message: string,
  nowRfc3339: string,
  generation?: number,
): Condition {
  const c: Condition = {
    type,
    status: ok ? "True" : "False",
    reason,
    message,
    lastTransitionTime: nowRfc3339,
  };
  if (generation !== undefined) c.observedGeneration = generation;
  return c;
}

/** Sets condition `next` in `conditions`, keeping the old transition time from `previous`
 * when the status did not change. */
export function setCondition(conditions: Condition[], previous: Condition[], next: Condition): void {
  const old = previous.find((c) => c.type === next.type);
  if (old && old.status === next.status && old.lastTransitionTime) {
    next.lastTransitionTime = old.lastTransitionTime;
  }
  const kept = conditions.filter((c) => c.type !== next.type);
  conditions.splice(0, conditions.length, ...kept, next);
}
