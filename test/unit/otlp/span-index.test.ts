import { describe, expect, it } from 'vitest';
import { SpanIndex, spanKey } from '../../../src/otlp/span-index.js';

/** A session's steps as the index reads them: the count, and the steps from a step_index on. */
function session(steps: Array<{ trace: string; span: string; step: string }>) {
  const queries: string[] = [];
  return {
    steps,
    queries,
    client: {
      async query(text: string, values: unknown[] = []) {
        if (text.includes('count(*)')) {
          queries.push('count');
          return { rows: [{ n: String(steps.length) }] };
        }
        const from = Number(values[1]);
        queries.push(`scan from ${from}`);
        return { rows: steps.slice(from).map((s) => ({ step: s.step, trace: s.trace, span: s.span })) };
      },
    },
  };
}

describe('SpanIndex', () => {
  it('reads a session whole once, then only the steps appended since, and nothing for its own appends', async () => {
    const s = session([
      { trace: 't1', span: 'a', step: 'step-a' },
      { trace: 't1', span: 'b', step: 'step-b' },
    ]);
    const index = new SpanIndex();
    expect([...(await index.of(s.client, 'u', 'conv'))]).toEqual([
      [spanKey('t1', 'a'), 'step-a'],
      [spanKey('t1', 'b'), 'step-b'],
    ]);
    // Its own append: known without a read.
    s.steps.push({ trace: 't1', span: 'c', step: 'step-c' });
    index.appended('u', 'conv', [[spanKey('t1', 'c'), 'step-c', 2]]);
    expect((await index.of(s.client, 'u', 'conv')).get(spanKey('t1', 'c'))).toBe('step-c');
    // Another writer's append: read from where the index stopped.
    s.steps.push({ trace: 't2', span: 'd', step: 'step-d' });
    expect((await index.of(s.client, 'u', 'conv')).get(spanKey('t2', 'd'))).toBe('step-d');
    expect(s.queries).toEqual(['count', 'scan from 0', 'count', 'count', 'scan from 3']);
  });

  it('reads again from where it stood when another writer appended between its read and its own append', async () => {
    const s = session([{ trace: 't', span: 'a', step: 'A' }]);
    const index = new SpanIndex();
    await index.of(s.client, 'u', 'conv');
    // An agent's INSERT (step 1) came before the ingest's (step 2).
    s.steps.push({ trace: 't', span: 'agent-row', step: 'X' }, { trace: 't', span: 'b', step: 'B' });
    index.appended('u', 'conv', [[spanKey('t', 'b'), 'B', 2]]);
    expect((await index.of(s.client, 'u', 'conv')).get(spanKey('t', 'agent-row'))).toBe('X');
    expect(s.queries).toEqual(['count', 'scan from 0', 'count', 'scan from 1']);
  });

  it('reads a session whole again when it holds fewer steps than it knew (retention removed it)', async () => {
    const s = session([{ trace: 't', span: 'old', step: 'step-old' }]);
    const index = new SpanIndex();
    await index.of(s.client, 'u', 'conv');
    s.steps.splice(0, 1);
    expect((await index.of(s.client, 'u', 'conv')).size).toBe(0);
    s.steps.push({ trace: 't', span: 'new', step: 'step-new' });
    expect([...(await index.of(s.client, 'u', 'conv')).keys()]).toEqual([spanKey('t', 'new')]);
  });

  it('keeps what each user reads apart, and forgets the least recently used sessions past its size', async () => {
    const index = new SpanIndex(2);
    const a = session([{ trace: 't', span: 'a', step: 'A' }]);
    const b = session([{ trace: 't', span: 'b', step: 'B' }]);
    const c = session([{ trace: 't', span: 'c', step: 'C' }]);
    await index.of(a.client, 'u', 'a');
    await index.of(b.client, 'other', 'b');
    await index.of(c.client, 'u', 'c');
    // 'a' was forgotten: it is read whole again.
    await index.of(a.client, 'u', 'a');
    expect(a.queries).toEqual(['count', 'scan from 0', 'count', 'scan from 0']);
  });
});
