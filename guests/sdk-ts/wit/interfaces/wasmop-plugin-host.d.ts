declare module 'wasmop:plugin/host@0.4.0' {
  /**
   * Write a line to the host's structured log, tagged with the plugin and the object
   * being reconciled.
   */
  export function log(level: Level, message: string): void;
  /**
   * Log severity.
   * # Variants
   * 
   * ## `"trace"`
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
}
