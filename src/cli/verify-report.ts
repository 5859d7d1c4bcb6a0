import type { ChainVerdict } from '../ledger/chain/verdict.js';
import type { LogReport } from '../ledger/log/log-verify.js';
import { printLogReport } from './log-commands.js';

type Out = (s: string) => void;

/** A redaction recorded in `_cot_redactions`, with the record that authorised it. */
export interface RedactionListing {
  readonly ledger: string;
  readonly chainKey: string;
  readonly stepIndex: number;
  readonly column: string;
  readonly redactionId: string;
  readonly reason: string;
  readonly redactedBy: string;
  readonly redactedAt: string;
}

/** What `cotwire verify` found on either engine. */
export interface VerifyReport {
  readonly verdicts: readonly ChainVerdict[];
  /** The global log held against saved checkpoints, when asked for. */
  readonly log: LogReport | null;
  /** The redactions recorded, where the engine lists them; null where it does not. */
  readonly redactions: readonly RedactionListing[] | null;
}

/** Prints the report, as JSON or as lines; the exit code: 0 when everything is intact, 1 otherwise. */
export function printVerifyReport(report: VerifyReport, json: boolean, out: Out): number {
  const { verdicts, log, redactions } = report;
  const broken = verdicts.filter((v) => !v.valid);
  const valid = broken.length === 0 && (log === null || log.breaks.length === 0);
  if (json) {
    out(
      `${JSON.stringify({ valid, chains: verdicts.length, broken, ...(redactions === null ? {} : { redactions }), ...(log === null ? {} : { log }) }, null, 2)}\n`,
    );
    return valid ? 0 : 1;
  }
  for (const r of redactions ?? []) {
    out(
      `REDACTED ${r.ledger} chain "${r.chainKey}" step ${r.stepIndex} ${r.column}: ${r.reason} (by ${r.redactedBy} at ${r.redactedAt}, record ${r.redactionId})\n`,
    );
  }
  for (const v of broken) {
    out(
      `BROKEN ${v.table} chain "${v.chainKey}": step ${v.firstBrokenIndex ?? '?'} ${v.breakKind ?? ''}; expected ${v.expectedHash ?? ''}, found ${v.actualHash ?? ''}\n`,
    );
  }
  if (log !== null) printLogReport(log, out);
  const steps = verdicts.reduce((n, v) => n + v.stepCount, 0);
  out(
    `${valid ? 'OK' : 'FAILED'}: ${verdicts.length} chains, ${steps} steps, ${broken.length} broken${log === null ? '' : `; log ${log.breaks.length === 0 ? 'intact' : 'BROKEN'}`}\n`,
  );
  return valid ? 0 : 1;
}

/** After an import: each broken chain in one line, then the verdict; 0 when every chain verified. */
export function printImportVerdict(verdicts: readonly ChainVerdict[], summary: (chains: number, broken: number) => string, out: Out): number {
  const broken = verdicts.filter((v) => !v.valid);
  for (const v of broken) out(`BROKEN ${v.table} chain "${v.chainKey}": step ${v.firstBrokenIndex ?? '?'} ${v.breakKind ?? ''}\n`);
  out(`${broken.length === 0 ? 'OK' : 'FAILED'}: ${summary(verdicts.length, broken.length)}\n`);
  return broken.length === 0 ? 0 : 1;
}
