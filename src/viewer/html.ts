/**
 * HTML as text, escaped by construction: `html` templates escape every interpolated value unless it is itself
 * markup made by `html`. The viewer's pages are built from these and nothing else, so a step's content (which
 * an agent wrote, and a model before it) can never become markup.
 */

export class Markup {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

type Part = Markup | string | number | boolean | null | undefined | readonly Part[];

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function render(p: Part): string {
  if (p instanceof Markup) return p.text;
  if (Array.isArray(p)) return p.map(render).join('');
  if (p === null || p === undefined || p === false) return '';
  return escapeHtml(String(p));
}

export function html(strings: TemplateStringsArray, ...values: Part[]): Markup {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += render(v) + (strings[i + 1] ?? '');
  });
  return new Markup(out);
}

/** A query string's value, for a link's href (itself escaped when placed in an attribute). */
export function query(params: Readonly<Record<string, string | number | null | undefined>>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

const STYLE = `
:root { color-scheme: light dark; --muted: #6b7280; --ok: #15803d; --bad: #b91c1c; --line: #d1d5db; --badge: #eef2ff; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 0 16px 48px; }
header { display: flex; gap: 16px; align-items: baseline; border-bottom: 1px solid var(--line); padding: 12px 0; margin-bottom: 16px; }
header a.home { font-weight: 700; text-decoration: none; color: inherit; }
header .who { margin-left: auto; color: var(--muted); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); }
form.filters { display: flex; flex-wrap: wrap; gap: 8px; align-items: end; margin-bottom: 16px; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
.mark-ok { color: var(--ok); font-weight: 600; }
.mark-bad { color: var(--bad); font-weight: 600; }
.mark-unknown { color: var(--muted); }
.badge { display: inline-block; padding: 0 6px; border-radius: 4px; background: var(--badge); color: #1e1b4b; font-size: 12px; }
.redacted { background: repeating-linear-gradient(45deg, #9ca3af33, #9ca3af33 4px, transparent 4px, transparent 8px); padding: 0 4px; font-style: italic; }
.step { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; margin: 8px 0; }
.step .meta { color: var(--muted); font-size: 12px; display: flex; flex-wrap: wrap; gap: 12px; }
.content { white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #9ca3af1a; padding: 6px; border-radius: 4px; margin: 4px 0; }
ul.tree { list-style: none; padding-left: 18px; border-left: 1px dashed var(--line); }
ul.tree.root { border-left: none; padding-left: 0; }
.error { color: var(--bad); }
nav.pages { margin-top: 12px; display: flex; gap: 12px; }
`;

/** The page around a view's body: no script, no resource from anywhere but this page. */
export function page(title: string, user: string, body: Markup): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · cotwire</title>
<style>${new Markup(STYLE)}</style>
</head>
<body>
<header><a class="home" href="/">cotwire</a><span>${title}</span><span class="who">${user}</span></header>
<main>
${body}
</main>
</body>
</html>
`.text;
}

/** What the viewer sends with every page: nothing may load from elsewhere, run a script, or frame it. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};
