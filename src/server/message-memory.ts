import type { MessageMemory } from '../protocol/framer.js';

/**
 * The server's share of limits.memoryMB for messages being received: a
 * large message that arrives in pieces is buffered until whole, and every
 * connection's such buffers together hold at most `capacity` bytes.
 */
export class SharedMessageMemory implements MessageMemory {
  private held = 0;

  constructor(readonly capacity: number) {}

  take(bytes: number): boolean {
    if (this.held + bytes > this.capacity) return false;
    this.held += bytes;
    return true;
  }

  give(bytes: number): void {
    this.held = Math.max(0, this.held - bytes);
  }

  /** What is held now, in bytes. */
  get inUse(): number {
    return this.held;
  }
}
