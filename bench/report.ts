import { existsSync, readFileSync, writeFileSync } from 'node:fs';

/** One workload's figures: every run of each system, the median ratio, and the target. */
export interface Row {
  readonly name: string;
  readonly unit: string;
  readonly cot: readonly number[];
  readonly pg: readonly number[];
  /** cotwire ÷ PostgreSQL, oriented so that above 1 is better for cotwire. */
  readonly ratio: number;
  /** PostgreSQL doing the same job: the chain computed by a trigger under a per-session lock (dataset.ts, anchorSchema). */
  readonly anchor?: readonly number[];
  /** cotwire ÷ the trigger anchor, oriented likewise. */
  readonly anchorRatio?: number;
  readonly target: string;
  readonly met: boolean;
  readonly rssMiB: number;
}

const START = '<!-- bench:start -->';
const END = '<!-- bench:end -->';

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? Number.NaN : s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

function figure(xs: readonly number[]): string {
  const finite = xs.filter(Number.isFinite);
  if (finite.length === 0) return '—';
  const m = median(finite);
  const digits = m >= 100 ? 0 : m >= 10 ? 1 : 2;
  const spread = finite.length > 1 ? ` (${Math.min(...finite).toFixed(digits)}–${Math.max(...finite).toFixed(digits)})` : '';
  return `${m.toFixed(digits)}${spread}`;
}

const ratio = (x: number | undefined): string => (x !== undefined && Number.isFinite(x) ? `${x.toFixed(2)}×` : '—');

/** The markdown table, also written between the markers of docs/benchmarks.md (the rest of that page is prose). */
export function writeReport(path: string, rows: readonly Row[], meta: { machine: string; quick: boolean; seconds: number; notes?: readonly string[] }): string {
  const lines = [
    `Run: ${new Date().toISOString().slice(0, 10)}, ${meta.quick ? '`npm run bench -- --quick`' : '`npm run bench`'}, ${Math.round(meta.seconds)} s. Machine: ${meta.machine}.`,
    'Medians of the runs, with the range in parentheses; the systems ran interleaved, with the same `pg` client and the same rows. "PostgreSQL" is a plain table; "PostgreSQL, trigger chain" does the same job as cotwire (the chain computed by a BEFORE INSERT trigger under a per-session row lock, an index on (session_id, step_index), a SQL function that recomputes one session).',
    '',
    '| workload | unit | cotwire | PostgreSQL | PostgreSQL, trigger chain | ÷ PostgreSQL | ÷ trigger chain | target | met | cotwire peak RSS |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.name} | ${r.unit} | ${figure(r.cot)} | ${figure(r.pg)} | ${figure(r.anchor ?? [])} | ${ratio(r.ratio)} | ${ratio(r.anchorRatio)} | ${r.target} | ${r.met ? 'yes' : '**no**'} | ${Number.isFinite(r.rssMiB) && r.rssMiB > 0 ? `${Math.round(r.rssMiB)} MiB` : '—'} |`,
    ),
  ];
  if (meta.notes !== undefined && meta.notes.length > 0)
    lines.push('', "How each read path's p50 grows with the ledger (flat is 1×; the ledger grew about tenfold):", '', ...meta.notes);
  const table = lines.join('\n');
  const page = existsSync(path) ? readFileSync(path, 'utf8') : '';
  const at = page.indexOf(START);
  const end = page.indexOf(END);
  const next = at >= 0 && end > at ? `${page.slice(0, at + START.length)}\n${table}\n${page.slice(end)}` : `${page}\n${START}\n${table}\n${END}\n`;
  writeFileSync(path, next);
  return table;
}

/** Writes `text` between the `<!-- NAME:start -->` and `<!-- NAME:end -->` markers of the page; without them it only says so. */
export function writeSection(path: string, name: string, text: string): void {
  const page = readFileSync(path, 'utf8');
  const [start, end] = [`<!-- ${name}:start -->`, `<!-- ${name}:end -->`];
  const at = page.indexOf(start);
  const stop = page.indexOf(end);
  if (at >= 0 && stop > at) writeFileSync(path, `${page.slice(0, at + start.length)}\n${text}\n${page.slice(stop)}`);
  else console.error(`${path} has no ${name} markers: the section is printed only`);
}
