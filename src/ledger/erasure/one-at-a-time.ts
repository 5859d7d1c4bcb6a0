/** Runs calls one after another, in the order asked, whatever each one's outcome. */
export class OneAtATime {
  private last: Promise<unknown> = Promise.resolve();

  run<T>(call: () => Promise<T>): Promise<T> {
    const next = this.last.then(call);
    this.last = next.catch(() => undefined);
    return next;
  }

  /** Resolves once the runs asked for so far have ended. */
  async idle(): Promise<void> {
    await this.last;
  }
}
