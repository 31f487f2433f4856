/** Lines in the host's log, tagged by the host with the plugin and the object being
 * reconciled. Outside a component (native tests) they go to the console. */

/** Log severity. */
export type Level = "trace" | "debug" | "info" | "warn" | "error";

let sink: (level: Level, message: string) => void = (level, message) => {
  console.error(`[${level}] ${message}`);
};

/** Where log lines go (the component's exports point it at the host). */
export function setLogSink(f: (level: Level, message: string) => void): void {
  sink = f;
}

/** Writes `message` at `level`. */
export function log(level: Level, message: string): void {
  sink(level, message);
}
