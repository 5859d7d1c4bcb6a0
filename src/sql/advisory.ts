import { parsedOf, type SqlSource, textOf } from './parsed.js';

/**
 * PostgreSQL's advisory-lock functions, as cotwire serves them (the
 * catalog's per-connection macros, the handler's lock table): what each
 * does, and the key it takes, one bigint or two integers in two spaces.
 */

export interface AdvisoryFunction {
  /** The operation the engine function carries out. */
  readonly op: string;
  readonly returns: 'void' | 'boolean';
  /** Whether the statement waits for the lock (the blocking forms). */
  readonly waits: boolean;
}

export const ADVISORY_FUNCTIONS: Readonly<Record<string, AdvisoryFunction>> = {
  pg_advisory_lock: { op: 'lock', returns: 'void', waits: true },
  pg_advisory_lock_shared: { op: 'lock_shared', returns: 'void', waits: true },
  pg_advisory_xact_lock: { op: 'xact_lock', returns: 'void', waits: true },
  pg_advisory_xact_lock_shared: { op: 'xact_lock_shared', returns: 'void', waits: true },
  pg_try_advisory_lock: { op: 'try', returns: 'boolean', waits: false },
  pg_try_advisory_lock_shared: { op: 'try_shared', returns: 'boolean', waits: false },
  pg_try_advisory_xact_lock: { op: 'xact_try', returns: 'boolean', waits: false },
  pg_try_advisory_xact_lock_shared: { op: 'xact_try_shared', returns: 'boolean', waits: false },
  pg_advisory_unlock: { op: 'unlock', returns: 'boolean', waits: false },
  pg_advisory_unlock_shared: { op: 'unlock_shared', returns: 'boolean', waits: false },
};

/** The key of one bigint, or of two integers: separate spaces, as in PostgreSQL. */
export function advisoryKey(args: readonly string[]): string {
  return args.length === 1 ? `b:${args[0]}` : `i:${args.join(':')}`;
}

/** The same key as SQL over the macro's parameters. */
export function advisoryKeySql(params: readonly string[]): string {
  return params.length === 1 ? `'b:' || CAST(${params[0]} AS VARCHAR)` : `'i:' || CAST(${params[0]} AS VARCHAR) || ':' || CAST(${params[1]} AS VARCHAR)`;
}

export interface AdvisoryWait {
  readonly key: string;
  readonly shared: boolean;
}

type Node = Record<string, unknown>;

const integer = (e: Node | undefined): string | null => {
  const c = e?.A_Const as Node | undefined;
  const ival = c?.ival as { ival?: number } | undefined;
  if (c !== undefined && ival !== undefined) return String(ival.ival ?? 0);
  const fval = (c?.fval as { fval?: string } | undefined)?.fval;
  if (fval !== undefined && /^-?\d+$/.test(fval)) return fval;
  const minus = e?.A_Expr as Node | undefined;
  const op = (minus?.name as Array<{ String?: { sval?: string } }> | undefined)?.[0]?.String?.sval;
  if (minus !== undefined && op === '-' && minus.lexpr === undefined) {
    const v = integer(minus.rexpr as Node | undefined);
    return v === null ? null : v.startsWith('-') ? v.slice(1) : `-${v}`;
  }
  const cast = e?.TypeCast as Node | undefined;
  return cast === undefined ? null : integer(cast.arg as Node | undefined);
};

/** The locks a statement takes with the blocking functions on constant keys: it waits for them before it runs. */
export function advisoryWaits(sql: SqlSource): AdvisoryWait[] {
  if (!/advisory/i.test(textOf(sql))) return [];
  const out: AdvisoryWait[] = [];
  for (const call of parsedOf(sql).calls ?? []) {
    const fn = ADVISORY_FUNCTIONS[call.name];
    const args = call.args.map(integer);
    if (fn?.waits === true && args.length >= 1 && args.length <= 2 && !args.includes(null)) {
      out.push({ key: advisoryKey(args as string[]), shared: fn.op.endsWith('_shared') });
    }
  }
  return out;
}
