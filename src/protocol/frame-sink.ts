/**
 * Where whole backend messages go as bytes, already encoded: an engine that
 * is itself a PostgreSQL answers a relayed exchange with its own messages.
 */
export interface FrameSink {
  frame(bytes: Uint8Array): void;
  /** Writes what has accumulated once it is large; false while the socket asks to wait (see drained). */
  flushIfFull(): boolean;
  /** Writes what has accumulated now: the engine's answer came in pieces, and the client may start on this one. */
  flush(): boolean;
  drained(): Promise<void>;
}
