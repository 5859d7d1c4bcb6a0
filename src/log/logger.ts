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
  return pino(options);
}

/**
 * A logger that writes each line before it returns, for the last words of a process about to end by a signal:
 * the server's own logger writes in the background, so that a slow reader of its output never stalls it.
 */
export function createFinalLogger(level: LogLevel): Logger {
  return pino({ level, base: { pid: process.pid } }, pino.destination({ dest: 1, sync: true }));
}
