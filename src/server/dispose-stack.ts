/** One thing a start-up part opened, undone with the stop's grace period (0 when a start fails). */
export type Undo = (graceMs: number) => Promise<void> | void;

/**
 * What a server's start-up opened, part by part: each part pushes what
 * undoes it, and a stop, or a part that fails to start, unwinds the stack in
 * reverse order, so that everything opened is closed exactly once and in the
 * order that keeps it whole (the listener before the writer, the writer
 * before the engine).
 */
export class DisposeStack {
  private readonly undo: Undo[] = [];
  private unwound: Promise<void> | null = null;

  /** Keeps `value`, to be undone by `dispose` at the unwind; returns it. */
  use<T>(value: T, dispose: (value: T, graceMs: number) => Promise<void> | void): T {
    this.undo.push((graceMs) => dispose(value, graceMs));
    return value;
  }

  defer(undo: Undo): void {
    this.undo.push(undo);
  }

  /**
   * Undoes everything, last first, once: a second call waits for the first.
   * Every step runs even if an earlier one failed; the first failure is
   * thrown once all have run.
   */
  unwind(graceMs: number): Promise<void> {
    this.unwound ??= (async () => {
      let failure: { err: unknown } | null = null;
      for (let undo = this.undo.pop(); undo !== undefined; undo = this.undo.pop()) {
        try {
          await undo(graceMs);
        } catch (err) {
          failure ??= { err };
        }
      }
      if (failure !== null) throw failure.err;
    })();
    return this.unwound;
  }
}

/** Runs a start-up's parts on a new stack; if one fails, what the others opened is undone before the error goes on. */
export async function startParts<T>(build: (stack: DisposeStack) => Promise<T>): Promise<{ readonly value: T; readonly stack: DisposeStack }> {
  const stack = new DisposeStack();
  try {
    return { value: await build(stack), stack };
  } catch (err) {
    await stack.unwind(0).catch(() => undefined);
    throw err;
  }
}
