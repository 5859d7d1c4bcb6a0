import pino, { type Logger } from 'pino';
import type { LogLevel } from '../config/schema.js';

export type { Logger };

/**
 * JSON lines for machines; a readable form when a person watches the
 * terminal (pino-pretty, a development dependency: where it is not
 * installed, as in the container, the output stays JSON). Secrets that could
 * reach a log line are redacted by path.
 */
export function createLogger(level: LogLevel, interactive: boolean, destination?: NodeJS.WritableStream): Logger {
  const options = {
    level,
    base: { pid: process.pid },
    redact: { paths: ['password', '*.password', 'startup.password', 'sasl', '*.sasl'], censor: '[redacted]' },
  };
  if (destination !== undefined) return pino(options, destination);
  if (interactive) {
    try {
      return pino({
        ...options,
        transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } },
      });
    } catch {
      // pino-pretty is not installed: JSON it is.
    }
  }
  // Written synchronously: a line logged just before the process ends (a second signal, a failed start) is not lost
  // in a buffer. The server logs per connection, never per statement, so the cost does not show.
  return pino(options, pino.destination({ dest: 1, sync: true }));
}
