/**
 * Where whole backend messages go as bytes, already encoded: an engine that
 * is itself a PostgreSQL answers a relayed exchange with its own messages.
 */
export interface FrameSink {
  frame(bytes: Uint8Array): void;
  /** Writes what has accumulated once it is large; false while the socket asks to wait (see drained). */
  flushIfFull(): boolean;
  drained(): Promise<void>;
}
