import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { LogLevel } from '../config/schema.js';

export type { Logger };

/**
 * JSON lines for machines; a readable form when a person watches the
 * terminal. Secrets that could reach a log line are redacted by path.
 */
export function createLogger(level: LogLevel, interactive: boolean, destination?: NodeJS.WritableStream): Logger {
  const options = {
    level,
    base: { pid: process.pid },
    redact: { paths: ['password', '*.password', 'startup.password', 'sasl', '*.sasl'], censor: '[redacted]' },
  };
  if (interactive) {
    return pino(options, pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', sync: true }));
  }
  return destination === undefined ? pino(options) : pino(options, destination);
}
