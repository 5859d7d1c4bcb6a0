import { BIGINT, BOOLEAN, type DuckDBConnection, DuckDBScalarFunction, type DuckDBType, VARCHAR } from '@duckdb/node-api';
import { jsonbAt, jsonbContains, jsonbText } from '../../../sql/jsonb.js';
import { quotientText, squareRootText } from '../../../sql/numeric.js';
import { pgTextOf } from '../../../engine/pg-text.js';

/**
 * The functions the catalog's macros call, computed here where DuckDB has no
 * SQL that gives PostgreSQL's answer: registered on every connection before
 * the catalog is set up, as the macros name them.
 */
export function registerCatalogFunctions(conn: DuckDBConnection): void {
  registerEngineClock(conn);
  // Numeric arithmetic as PostgreSQL computes it (sql/numeric.ts), where DuckDB's is a double: division,
  // average and square root, each value a numeric's text beside its DuckDB type.
  scalar(conn, 'cot_numeric_quotient', 4, VARCHAR, ([a = '', ta = '', b = '', tb = '']) => quotientText(a, ta, b, tb));
  scalar(conn, 'cot_numeric_sqrt', 2, VARCHAR, ([x = '', tx = '']) => squareRootText(x, tx));
  // A list or an interval printed as PostgreSQL prints it (sql/pg-text.ts), from DuckDB's text and type.
  scalar(conn, 'cot_pg_text', 2, VARCHAR, ([text = '', type = '']) => pgTextOf(text, type));
  // jsonb's text (sql/jsonb.ts): keys shortest first and in byte order, the last of a repeated key, PostgreSQL's spacing.
  scalar(conn, 'cot_jsonb_text', 1, VARCHAR, ([json = '']) => {
    const text = jsonbText(json);
    if (text === null) throw new Error('invalid input syntax for type json');
    return text;
  });
  // jsonb's -> and ->> (sql/jsonb.ts) on one key or index ('key' or 'index', then '_text' for ->>), and #> and #>> on a
  // path (a JSON array of its texts; 'text' for #>>), with numbers as numeric prints them (DuckDB's JSON reads doubles).
  scalar(conn, 'cot_jsonb_get', 3, VARCHAR, ([json = '', step = '', mode = '']) =>
    jsonbAt(json, [mode.startsWith('index') ? { index: Number(step) } : { key: step }], mode.endsWith('_text')),
  );
  scalar(conn, 'cot_jsonb_path', 3, VARCHAR, ([json = '', path = '', mode = '']) =>
    jsonbAt(
      json,
      (JSON.parse(path) as string[]).map((p) => ({ path: p })),
      mode === 'text',
    ),
  );
  // jsonb's @> (sql/jsonb.ts): DuckDB's json_contains searches at every depth.
  scalar(conn, 'cot_jsonb_contains_text', 2, BOOLEAN, ([a = '', b = '']) => {
    const answer = jsonbContains(a, b);
    if (answer === null) throw new Error('invalid input syntax for type json');
    return answer;
  });
}

/**
 * cot_clock_micros(): the wall clock at each call, in microseconds, which
 * clock_timestamp() in the catalog layer reads (DuckDB's now() is the
 * transaction's start).
 */
function registerEngineClock(conn: DuckDBConnection): void {
  conn.registerScalarFunction(
    DuckDBScalarFunction.create({
      name: 'cot_clock_micros',
      returnType: BIGINT,
      parameterTypes: [],
      volatile: true,
      mainFunction: (_info, input, output) => {
        for (let row = 0; row < input.rowCount; row++) output.setItem(row, BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)));
        output.flush();
      },
    }),
  );
}

/**
 * A function of VARCHAR arguments: the values and their type names in turn
 * (a NULL value gives NULL; a type name is never NULL). An exception is the
 * statement's error.
 */
function scalar<T extends string | boolean | null>(
  conn: DuckDBConnection,
  name: string,
  arity: number,
  returnType: DuckDBType,
  fn: (args: readonly string[]) => T,
): void {
  conn.registerScalarFunction(
    DuckDBScalarFunction.create({
      name,
      returnType,
      parameterTypes: Array.from({ length: arity }, () => VARCHAR),
      mainFunction: (info, input, output) => {
        const columns = Array.from({ length: arity }, (_, i) => input.getColumnVector(i));
        for (let row = 0; row < input.rowCount; row++) {
          const args = columns.map((v) => v.getItem(row) as string | null);
          if (args.some((a) => a == null)) {
            output.setItem(row, null);
            continue;
          }
          try {
            output.setItem(row, fn(args as string[]));
          } catch (err) {
            info.setError((err as Error).message);
            return;
          }
        }
        output.flush();
      },
    }),
  );
}
