import { appendFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ChainHeadRecord, cutChains } from '../../../src/engines/duckdb/ledger/head-record.js';

const root = mkdtempSync(join(tmpdir(), 'cotwire-heads-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const head = (index: number, seq = index + 1) => ({ index, hash: `h${index}`, seq });

function reopen(path: string): { record: ChainHeadRecord; found: boolean; damage: string[] } {
  const damage: string[] = [];
  const opened = ChainHeadRecord.open(path, (detail, movedTo) => damage.push(`${detail} -> ${String(movedTo)}`));
  return { ...opened, damage };
}

describe('the record of chain heads', () => {
  it('keeps the last head noted for each chain across a close and an open', () => {
    const path = join(root, 'a.heads');
    const first = reopen(path);
    expect(first.found).toBe(false);
    first.record.note('main._cot_steps', 's', head(0));
    first.record.note('main._cot_steps', 's', head(1));
    first.record.note('main._cot_steps', 't', head(0, 3));
    first.record.note('main.other', '', head(4));
    first.record.close();
    const again = reopen(path);
    expect(again.found).toBe(true);
    expect(again.damage).toEqual([]);
    expect([...(again.record.expected('main._cot_steps') ?? [])]).toEqual([
      ['s', head(1)],
      ['t', head(0, 3)],
    ]);
    expect(again.record.expected('main.other')?.get('')).toEqual(head(4));
    again.record.close();
  });

  it('skips a last line a crash cut short, and reports lines that are not heads', () => {
    const path = join(root, 'b.heads');
    const r = reopen(path).record;
    r.note('main._cot_steps', 's', head(2));
    r.close();
    appendFileSync(path, '["main._cot_steps","s",3,"h3",4]\n{"not":"a head"}\n["main._cot_steps","s",9,"h9');
    const again = reopen(path);
    expect(again.damage).toEqual([`1 lines of ${path} are not chain heads and were skipped -> null`]);
    expect(again.record.expected('main._cot_steps')?.get('s')).toEqual(head(3, 4));
    again.record.close();
    // The open rewrote it whole, without the damage.
    expect(readFileSync(path, 'utf8').split('\n')).toEqual(['cotwire chain heads 1', '["main._cot_steps","s",3,"h3",4]', '']);
  });

  it('moves a file that is not a record aside, and starts a new one', () => {
    const path = join(root, 'c.heads');
    writeFileSync(path, 'something else\n["main._cot_steps","s",3,"h3",4]\n');
    const opened = reopen(path);
    expect(opened.damage).toHaveLength(1);
    expect(opened.damage[0]).toMatch(new RegExp(`^${path} does not start with "cotwire chain heads 1" -> ${path}\\.damaged-`));
    expect(opened.record.expected('main._cot_steps')).toBeUndefined();
    opened.record.close();
    expect(readdirSync(root).filter((f) => f.startsWith('c.heads.damaged-'))).toHaveLength(1);
  });

  it('forgets a ledger created anew: its old chains are not cut', () => {
    const path = join(root, 'e.heads');
    const r = reopen(path).record;
    r.note('main._cot_things', 'a', head(5));
    r.dropLedger('main._cot_things');
    r.close();
    const again = reopen(path).record;
    expect(cutChains('main._cot_things', again.expected('main._cot_things'), new Map())).toEqual([]);
    again.close();
  });

  it('is rewritten whole once it grows past twice what it holds', () => {
    const path = join(root, 'd.heads');
    const r = reopen(path).record;
    for (let i = 0; i < 20_000; i++) {
      r.note('main._cot_steps', 's', head(i));
      r.flush();
    }
    r.close();
    expect(statSync(path).size).toBeLessThan(200_000);
    expect(reopen(path).record.expected('main._cot_steps')?.get('s')).toEqual(head(19_999));
    expect(existsSync(`${path}.tmp`)).toBe(false);
  });
});

describe('a cut chain', () => {
  const recorded = new Map([
    ['short', head(4)],
    ['gone', head(2)],
    ['rewritten', head(3)],
    ['longer', head(1)],
    ['same', head(5)],
    ['accepted empty', { index: -1, hash: '', seq: 0 }],
  ]);
  const present = new Map<string, { index: number; hash: string }>([
    ['short', head(2)],
    ['rewritten', { index: 3, hash: 'other' }],
    ['longer', head(7)],
    ['same', head(5)],
  ]);

  it('is one whose rows end before its recorded head, or whose head row is another', () => {
    expect(cutChains('main._cot_steps', recorded, present).map((c) => [c.key, c.present?.index ?? null])).toEqual([
      ['short', 2],
      ['gone', null],
      ['rewritten', 3],
    ]);
    expect(cutChains('main._cot_steps', undefined, present)).toEqual([]);
  });
});
