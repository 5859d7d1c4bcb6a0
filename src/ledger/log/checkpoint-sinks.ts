import { appendFile, mkdir, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CheckpointSink } from './checkpoints.js';

/**
 * The external sinks a checkpoint is written to. A configured target is a
 * URL (http:// or https://: each checkpoint is POSTed to it), a directory
 * (an existing one, or a path ending in "/": one file per checkpoint, named
 * by its tree size so that they sort), or a file (each checkpoint appended).
 */
export function sinkFor(target: string, timeoutMs = 10_000): CheckpointSink {
  if (/^https?:\/\//i.test(target)) return webhookSink(target, timeoutMs);
  return fileSink(target);
}

function fileSink(path: string): CheckpointSink {
  return {
    name: path,
    async deliver(note, size) {
      if (path.endsWith('/') || (await isDirectory(path))) {
        await mkdir(path, { recursive: true });
        const file = join(path, `${String(size).padStart(20, '0')}.checkpoint`);
        // Whole or absent: a reader never sees half a note.
        await writeFile(`${file}.tmp`, note, { mode: 0o644 });
        await rename(`${file}.tmp`, file);
        return;
      }
      await appendFile(path, note);
    },
  };
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

function webhookSink(url: string, timeoutMs: number): CheckpointSink {
  // The URL may carry a token; logs name the endpoint only.
  const shown = new URL(url);
  const name = `${shown.protocol}//${shown.host}${shown.pathname}`;
  return {
    name,
    async deliver(note, size) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'text/plain; charset=utf-8', 'x-cotwire-tree-size': String(size) },
        body: note,
        signal: AbortSignal.timeout(timeoutMs),
      });
      // Drain the body so that the connection can be reused.
      await response.arrayBuffer().catch(() => undefined);
      if (!response.ok) throw new Error(`${name} answered HTTP ${response.status}`);
    },
  };
}
