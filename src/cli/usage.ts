/** A mistake in how a command was called: one line, exit code 2. */
export class UsageError extends Error {}
