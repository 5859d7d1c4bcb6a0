/**
 * The startup `options` parameter, as libpq's PGOPTIONS: "-c name=value"
 * or "--name=value", separated by spaces, with backslash escapes.
 */
export function parseOptions(options: string): Array<[string, string]> {
  const words: string[] = [];
  let current = '';
  let escaped = false;
  for (const ch of options) {
    if (escaped) {
      current += ch;
      escaped = false;
    } else if (ch === '\\') {
      escaped = true;
    } else if (/\s/.test(ch)) {
      if (current !== '') words.push(current);
      current = '';
    } else {
      current += ch;
    }
  }
  if (current !== '') words.push(current);
  const out: Array<[string, string]> = [];
  for (let i = 0; i < words.length; i++) {
    let w = words[i] as string;
    if (w === '-c') w = words[++i] ?? '';
    else if (w.startsWith('-c')) w = w.slice(2);
    else if (w.startsWith('--')) w = w.slice(2);
    else continue;
    const eq = w.indexOf('=');
    if (eq > 0) out.push([w.slice(0, eq).replaceAll('-', '_'), w.slice(eq + 1)]);
  }
  return out;
}
