/** One element of a PostgreSQL array literal: its text, NULL, or a nested array. */
export type ArrayItem = string | null | ArrayItem[];

/**
 * PostgreSQL's array text form ('{1,2,"a b",NULL,{3,4}}', as array_in reads
 * it) into nested lists of element texts; null when the text is not one.
 * Quoted elements keep their text (with backslash escapes undone); unquoted
 * ones are trimmed, NULL is null, and an empty unquoted element is malformed.
 */
export function parseArrayLiteral(text: string): ArrayItem[] | null {
  let i = 0;
  const skipSpace = (): void => {
    while (i < text.length && /\s/.test(text[i] as string)) i++;
  };
  const parseList = (): ArrayItem[] | null => {
    skipSpace();
    if (text[i] !== '{') return null;
    i++;
    const items: ArrayItem[] = [];
    skipSpace();
    if (text[i] === '}') {
      i++;
      return items;
    }
    for (;;) {
      skipSpace();
      if (text[i] === '{') {
        const inner = parseList();
        if (inner === null) return null;
        items.push(inner);
      } else if (text[i] === '"') {
        i++;
        let s = '';
        while (i < text.length && text[i] !== '"') {
          if (text[i] === '\\') i++;
          s += text[i] ?? '';
          i++;
        }
        if (text[i] !== '"') return null;
        i++;
        items.push(s);
      } else {
        let s = '';
        while (i < text.length && text[i] !== ',' && text[i] !== '}') {
          if (text[i] === '\\') i++;
          s += text[i] ?? '';
          i++;
        }
        s = s.trim();
        if (s === '') return null;
        items.push(s.toUpperCase() === 'NULL' ? null : s);
      }
      skipSpace();
      if (text[i] === ',') {
        i++;
        continue;
      }
      if (text[i] === '}') {
        i++;
        return items;
      }
      return null;
    }
  };
  const result = parseList();
  skipSpace();
  return result !== null && i === text.length ? result : null;
}
