import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serverNodeFlags } from '../test/fixtures/node-flags.js';

/** cotwire as its users run it: its own process (so that its memory can be measured), a file-backed database. */
export interface CotwireProcess {
  readonly databasePath: string;
  readonly port: number;
  /** The HTTP listener's port (OTLP, the viewer). */
  readonly httpPort: number;
  /** Peak resident memory since the last resetPeak(), in bytes. */
  peakRss(): number;
  /**
   * Peak anonymous resident memory (the heaps, DuckDB's buffers) since the last resetPeak(), in bytes: the rest of
   * the RSS is file pages mapped by the row store, which the kernel reclaims under pressure.
   */
  peakAnon(): number;
  resetPeak(): void;
  /** CPU time so far, in microseconds: the main thread's (where the protocol and the chain run) and the whole process's. */
  cpu(): { readonly main: number; readonly all: number };
  stop(): Promise<void>;
  restart(): Promise<void>;
  /** Resolves at the first log line since the last (re)start that matches, or rejects after `seconds`. */
  logged(pattern: RegExp, seconds: number): Promise<void>;
  /** Stops it and deletes its database. */
  remove(): Promise<void>;
}

/** utime + stime of a /proc stat file, in microseconds (clock ticks of 10 ms). */
function cpuOf(path: string): number {
  try {
    const fields = (readFileSync(path, 'utf8').split(') ')[1] ?? '').split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return 0;
  }
}

function rssOf(pid: number, field = 'VmRSS'): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? 0 : Number(m[1]) * 1024;
  } catch {
    return 0;
  }
}

/** `args`: more flags for `cotwire serve`, such as `--config FILE`. */
export async function startCotwire(root: string, args: readonly string[] = []): Promise<CotwireProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'cotwire-bench-'));
  const databasePath = join(dir, 'bench.duckdb');
  let child: ChildProcess | null = null;
  let port = 0;
  let httpPort = 0;
  let peak = 0;
  let anonPeak = 0;
  let sampler: NodeJS.Timeout | null = null;
  /** This run's log lines (the ones a caller may wait for are few and early), and who waits for which. */
  let lines: string[] = [];
  const waiters = new Set<{ readonly pattern: RegExp; readonly found: () => void }>();

  const start = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const p = spawn(
        process.execPath,
        [
          ...serverNodeFlags(),
          join(root, 'dist', 'launch.cjs'),
          'serve',
          '--port',
          '0',
          '--http-port',
          '0',
          '--db',
          databasePath,
          '--log-level',
          'info',
          ...args,
        ],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      child = p;
      let buffered = '';
      let partial = '';
      p.stdout?.on('data', (chunk: Buffer) => {
        const text = partial + chunk.toString('utf8');
        const complete = text.split('\n');
        partial = complete.pop() ?? '';
        for (const line of complete) {
          if (lines.length < 10_000) lines.push(line);
          for (const w of waiters) if (w.pattern.test(line)) w.found();
        }
        buffered += chunk.toString('utf8');
        const m = /"address":"[^"]*:(\d+)"/.exec(buffered);
        if (m !== null && port === 0) {
          port = Number(m[1]);
          httpPort = Number(/"http":(\d+)/.exec(buffered)?.[1] ?? 0);
          buffered = '';
          resolve();
        }
        if (buffered.length > 1 << 16) buffered = buffered.slice(-4096);
      });
      p.once('exit', (code) => reject(new Error(`cotwire exited with ${String(code)} before listening`)));
      sampler = setInterval(() => {
        if (p.pid !== undefined) {
          peak = Math.max(peak, rssOf(p.pid));
          anonPeak = Math.max(anonPeak, rssOf(p.pid, 'RssAnon'));
        }
      }, 50);
    });

  const stop = async (): Promise<void> => {
    const p = child;
    if (sampler !== null) clearInterval(sampler);
    if (p === null || p.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGTERM');
    });
    child = null;
  };

  await start();
  return {
    databasePath,
    get port() {
      return port;
    },
    get httpPort() {
      return httpPort;
    },
    peakRss: () => peak,
    peakAnon: () => anonPeak,
    resetPeak: () => {
      const pid = child?.pid;
      peak = pid === undefined ? 0 : rssOf(pid);
      anonPeak = pid === undefined ? 0 : rssOf(pid, 'RssAnon');
    },
    cpu: () => {
      const pid = (child as ChildProcess | null)?.pid;
      return pid === undefined ? { main: 0, all: 0 } : { main: cpuOf(`/proc/${pid}/task/${pid}/stat`), all: cpuOf(`/proc/${pid}/stat`) };
    },
    stop,
    async restart() {
      await stop();
      port = 0;
      lines = [];
      await start();
    },
    logged(pattern, seconds) {
      if (lines.some((l) => pattern.test(l))) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`cotwire did not log ${String(pattern)} within ${seconds} s`));
        }, seconds * 1000);
        const waiter = {
          pattern,
          found: () => {
            clearTimeout(timer);
            waiters.delete(waiter);
            resolve();
          },
        };
        waiters.add(waiter);
      });
    },
    async remove() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
