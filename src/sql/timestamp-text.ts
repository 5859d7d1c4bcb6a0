/**
 * A timestamp's text as PostgreSQL reads it and DuckDB does not: an offset
 * after a space ('2024-07-01 00:00:00.000 +00:00', as Sequelize writes
 * dates), `Z` after a space, and a time without seconds before an offset
 * ('2024-01-02 00:00+00'). The same text, in the form DuckDB reads
 * ('2024-07-01 00:00:00.000+00:00', '2024-01-02 00:00:00+00'); null when
 * the text needs nothing, or is not of this shape (a zone name, 'now',
 * 'infinity' ... are DuckDB's to read or refuse).
 */
const TIMESTAMP = /^(\s*\d{4,}-\d{1,2}-\d{1,2})([ T]|\s+)(\d{1,2}:\d{2})(:\d{2}(?:\.\d+)?)?(\s*)(Z|[+-]\d{1,2}(?::?\d{2}){0,2})?(\s*)$/i;

export function pgTimestampText(text: string): string | null {
  const m = TIMESTAMP.exec(text);
  if (m === null) return null;
  const [, date, separator, minutes, seconds, , offset, tail] = m as unknown as [
    string,
    string,
    string,
    string,
    string | undefined,
    string,
    string | undefined,
    string,
  ];
  const zone = offset === undefined ? '' : offset.toUpperCase() === 'Z' ? '+00' : offset;
  // Seconds only matter before an offset: DuckDB reads '2024-01-02 10:00' but not '2024-01-02 10:00+00'.
  const out = `${date}${separator}${minutes}${seconds ?? (zone === '' ? '' : ':00')}${zone}${tail}`;
  return out === text ? null : out;
}
