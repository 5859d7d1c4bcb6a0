import { html, type Markup, page, query } from './html.js';

/**
 * The viewer's two pages: the session list and a session. They are drawn from what cotwire's SQL functions
 * answered the reader (cot_session_summary, cot_verify, cot_replay, cot_search), never from anything else.
 */

export interface Verdict {
  readonly valid: boolean;
  readonly stepCount: number;
  readonly firstBrokenIndex: number | null;
  readonly breakKind: string | null;
}

export interface SessionSummary {
  readonly sessionId: string;
  readonly agentId: string | null;
  readonly stepCount: number;
  readonly firstStepAt: string;
  readonly lastStepAt: string;
  readonly verdict: Verdict;
}

export interface ListFilters {
  readonly agent: string;
  readonly type: string;
  readonly from: string;
  readonly to: string;
  readonly q: string;
  readonly offset: number;
}

export interface SearchHit {
  readonly sessionId: string;
  readonly stepIndex: number;
  readonly stepType: string;
  readonly content: string | null;
  readonly similarity: number;
}

export interface StepView {
  readonly traceId: string;
  readonly stepIndex: number;
  readonly stepType: string;
  readonly agentId: string | null;
  readonly model: string | null;
  readonly tokenCount: number | null;
  readonly durationMs: number | null;
  readonly content: string | null;
  readonly input: unknown;
  readonly output: unknown;
  readonly metadata: Record<string, unknown> | null;
  readonly createdAt: string;
  readonly parentTraceId: string | null;
  /** The columns whose value was redacted (a record of _cot_redactions names them). */
  readonly redacted: ReadonlySet<string>;
}

export const PAGE_SIZE = 25;

export function sessionListPage(
  user: string,
  stepTypes: readonly string[],
  filters: ListFilters,
  sessions: readonly SessionSummary[],
  more: boolean,
  hits: readonly SearchHit[] | string | null,
): string {
  const f = filters;
  const link = (offset: number): string => `/${query({ agent: f.agent, type: f.type, from: f.from, to: f.to, q: f.q, offset: offset || null })}`;
  const body = html`
<form class="filters" method="get" action="/">
  <label>agent <input name="agent" value="${f.agent}"></label>
  <label>step type <select name="type"><option value="">any</option>${stepTypes.map(
    (t) => html`<option${t === f.type ? html` selected` : ''}>${t}</option>`,
  )}</select></label>
  <label>active since <input type="datetime-local" name="from" value="${f.from}"></label>
  <label>active until <input type="datetime-local" name="to" value="${f.to}"></label>
  <label>search by meaning <input name="q" value="${f.q}" placeholder="what a step was about"></label>
  <button type="submit">show</button>
</form>
${hits === null ? '' : searchSection(f.q, hits)}
<table class="sessions">
<thead><tr><th>session</th><th>agent</th><th>first step</th><th>last step</th><th>steps</th><th>chain</th></tr></thead>
<tbody>
${sessions.length === 0 ? html`<tr><td colspan="6">No sessions.</td></tr>` : ''}
${sessions.map(
  (s) => html`<tr>
<td><a class="session" href="/sessions/${encodeURIComponent(s.sessionId)}">${s.sessionId}</a></td>
<td>${s.agentId ?? ''}</td><td>${s.firstStepAt}</td><td>${s.lastStepAt}</td><td>${s.stepCount}</td>
<td>${verdictMark(s.verdict)}</td>
</tr>`,
)}
</tbody>
</table>
<nav class="pages">${f.offset > 0 ? html`<a href="${link(Math.max(0, f.offset - PAGE_SIZE))}">newer</a>` : ''}${
    more ? html`<a href="${link(f.offset + PAGE_SIZE)}">older</a>` : ''
  }</nav>`;
  return page('sessions', user, body);
}

function searchSection(q: string, hits: readonly SearchHit[] | string): Markup {
  if (typeof hits === 'string') return html`<p class="error">Search by meaning failed: ${hits}</p>`;
  return html`<section class="hits"><h3>Steps about “${q}”</h3>
<table><thead><tr><th>similarity</th><th>session</th><th>step</th><th>type</th><th>content</th></tr></thead><tbody>
${hits.map(
  (h) => html`<tr><td>${h.similarity.toFixed(3)}</td><td><a href="/sessions/${encodeURIComponent(h.sessionId)}#step-${h.stepIndex}">${h.sessionId}</a></td>
<td>${h.stepIndex}</td><td><span class="badge">${h.stepType}</span></td><td>${excerpt(h.content)}</td></tr>`,
)}
</tbody></table></section>`;
}

function verdictMark(v: Verdict): Markup {
  if (v.valid) return html`<span class="mark-ok" title="every step's hash and link verified">✓ intact</span>`;
  return html`<span class="mark-bad" title="cot_verify found the chain broken">✗ broken at step ${v.firstBrokenIndex ?? '?'} (${v.breakKind ?? 'unknown'})</span>`;
}

/** Each step's mark: verified before the first break, broken at it, not verifiable after it. */
function stepMark(v: Verdict, index: number): Markup {
  if (v.valid || v.firstBrokenIndex === null || index < v.firstBrokenIndex) return html`<span class="mark-ok step-mark" data-mark="verified">✓ verified</span>`;
  if (index === v.firstBrokenIndex) return html`<span class="mark-bad step-mark" data-mark="broken">✗ broken (${v.breakKind ?? 'unknown'})</span>`;
  return html`<span class="mark-unknown step-mark" data-mark="after-break">? after the break</span>`;
}

export function sessionPage(user: string, sessionId: string, verdict: Verdict, steps: readonly StepView[], view: 'timeline' | 'tree'): string {
  const base = `/sessions/${encodeURIComponent(sessionId)}`;
  const body = html`
<p>${steps[0]?.agentId === undefined || steps[0]?.agentId === null ? '' : html`agent <strong>${steps[0].agentId}</strong> · `}${steps.length} steps ·
chain ${verdictMark(verdict)} · <a class="evidence" href="${base}/evidence">evidence bundle</a></p>
<p>view: ${view === 'timeline' ? html`<strong>timeline</strong>` : html`<a href="${base}">timeline</a>`} ·
${view === 'tree' ? html`<strong>tree</strong>` : html`<a href="${base}?view=tree">tree</a>`}</p>
${steps.length === 0 ? html`<p>No steps: the session does not exist, or you may not read it.</p>` : ''}
${view === 'timeline' ? html`<div class="timeline">${steps.map((s) => stepCard(s, verdict))}</div>` : tree(steps, verdict)}`;
  return page(`session ${sessionId}`, user, body);
}

/** The steps under the step their parent_trace_id names, or else the step of their span's parent (OTLP's spans). */
function tree(steps: readonly StepView[], verdict: Verdict): Markup {
  const byTrace = new Map(steps.map((s) => [s.traceId, s]));
  const bySpan = new Map<string, StepView>();
  for (const s of steps) {
    const span = otel(s)['span_id'];
    if (typeof span === 'string') bySpan.set(span, s);
  }
  const parentOf = (s: StepView): StepView | undefined => {
    if (s.parentTraceId !== null && byTrace.has(s.parentTraceId)) return byTrace.get(s.parentTraceId);
    const parentSpan = otel(s)['parent_span_id'];
    return typeof parentSpan === 'string' ? bySpan.get(parentSpan) : undefined;
  };
  const children = new Map<StepView | null, StepView[]>();
  for (const s of steps) {
    let parent = parentOf(s) ?? null;
    // A loop of links (which a chain check does not forbid) is cut: the step shows as a root.
    for (let p = parent, depth = 0; p !== null && p !== undefined; p = parentOf(p) ?? null, depth++) {
      if (p === s || depth > steps.length) {
        parent = null;
        break;
      }
    }
    const list = children.get(parent) ?? [];
    list.push(s);
    children.set(parent, list);
  }
  const branch = (parent: StepView | null, root: boolean): Markup =>
    html`<ul class="tree${root ? ' root' : ''}">${(children.get(parent) ?? []).map((s) => html`<li>${stepCard(s, verdict)}${children.has(s) ? branch(s, false) : ''}</li>`)}</ul>`;
  return html`<div class="tree-view">${branch(null, true)}</div>`;
}

function stepCard(s: StepView, verdict: Verdict): Markup {
  const start = otel(s)['start_time_unix_nano'];
  return html`<article class="step" id="step-${s.stepIndex}" data-step-type="${s.stepType}">
<div class="meta"><strong>#${s.stepIndex}</strong><span class="badge">${s.stepType}</span>${stepMark(verdict, s.stepIndex)}
<span>${s.createdAt}</span>${typeof start === 'string' && /^\d+$/.test(start) ? html`<span title="the span's start">started ${new Date(Number(BigInt(start) / 1_000_000n)).toISOString()}</span>` : ''}
${s.agentId === null ? '' : html`<span>agent ${s.agentId}</span>`}${s.model === null ? '' : html`<span>model ${s.model}</span>`}
${s.tokenCount === null ? '' : html`<span>${s.tokenCount} tokens</span>`}${s.durationMs === null ? '' : html`<span>${s.durationMs} ms</span>`}
<span class="trace-id">${s.traceId}</span><a class="receipt" href="/receipts/${s.traceId}">receipt</a></div>
<div class="content">${value(s, 'content', s.content)}</div>
${s.input === null ? '' : html`<details${s.stepType === 'ToolCall' ? html` open` : ''}><summary>${s.stepType === 'ToolCall' ? 'tool call' : 'input'}</summary>${json(s, 'input_data', s.input)}</details>`}
${s.output === null ? '' : html`<details${s.stepType === 'ToolCall' ? html` open` : ''}><summary>${s.stepType === 'ToolCall' ? 'result' : 'output'}</summary>${json(s, 'output_data', s.output)}</details>`}
${s.metadata === null ? '' : html`<details><summary>metadata</summary>${json(s, 'metadata', s.metadata)}</details>`}
</article>`;
}

function value(s: StepView, column: string, text: string | null): Markup {
  if (s.redacted.has(column)) return html`<span class="redacted" title="redacted: the value was erased; its hash still verifies">redacted</span>`;
  return html`${text ?? ''}`;
}

function json(s: StepView, column: string, v: unknown): Markup {
  if (s.redacted.has(column)) return value(s, column, null);
  return html`<pre>${typeof v === 'string' ? v : JSON.stringify(v, null, 2)}</pre>`;
}

function otel(s: StepView): Record<string, unknown> {
  const o = s.metadata?.['otel'];
  return typeof o === 'object' && o !== null ? (o as Record<string, unknown>) : {};
}

function excerpt(text: string | null): string {
  if (text === null) return '';
  return text.length > 160 ? `${text.slice(0, 160)}…` : text;
}

export function messagePage(user: string, title: string, message: string): string {
  return page(title, user, html`<p class="error">${message}</p><p><a href="/">all sessions</a></p>`);
}

export function loginPage(message: string | null): string {
  return page(
    'sign in',
    '',
    html`${message === null ? '' : html`<p class="error">${message}</p>`}
<form method="post" action="/login"><label>token <input type="password" name="token" autocomplete="off" size="60"></label> <button type="submit">sign in</button></form>
<p>The token is the one <code>cotwire token</code> printed for your user.</p>`,
  );
}
