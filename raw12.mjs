import { DuckDBInstance } from '@duckdb/node-api';
const D = process.env.D || './dist';
const { engineSetup, CATALOG_READERS, connectionSetup } = await import(`${D}/engines/duckdb/catalog/compat.js`);
const { CompatRewriter } = await import(`${D}/engines/duckdb/catalog/rewrite.js`);
const { refreshSql, pointAtSnapshot } = await import(`${D}/engines/duckdb/catalog/snapshot.js`);
const { registerCatalogFunctions } = await import(`${D}/engines/duckdb/adapter/engine.js`);
const { tokenize } = await import(`${D}/sql/lexer.js`);
const { catalogSchema } = await import('./dist-bench/bench/catalog.js');
import fs from 'node:fs';
const inst = await DuckDBInstance.create(':memory:'); const c = await inst.connect();
registerCatalogFunctions(c);
for (const s of engineSetup()) await c.run(s);
for (const s of connectionSetup('x','cotwire','cotwire','admin')) await c.run(s);
for (const s of catalogSchema()) await c.run(s.replace('varchar(80)','varchar').replace('varchar(20)','varchar'));
await c.run('CREATE SEQUENCE sq; CREATE TABLE sert (id integer DEFAULT nextval(\'sq\'), x int)');
await c.run(refreshSql().join(';\n'));
const rw = new CompatRewriter('cotwire');
const base = `FROM pg_attribute a JOIN pg_class cls ON cls.oid = a.attrelid JOIN pg_namespace ns ON ns.oid = cls.relnamespace WHERE a.attnum > 0 AND cls.relname = 't5' AND ns.nspname = 'public'`;
const parts = {
  plain: `SELECT a.attname ${base}`,
  regclass_out: `SELECT a.attrelid::regclass::text ${base}`,
  serial: `SELECT pg_get_serial_sequence('"public"."t5"', a.attname) ${base}`,
  serial_regclass: `SELECT pg_get_serial_sequence('"public"."t5"', a.attname)::regclass ${base}`,
  nested: `SELECT pg_get_serial_sequence(a.attrelid::regclass::text, a.attname)::regclass ${base}`,
  sert: `SELECT pg_get_serial_sequence('sert', 'id'), pg_get_serial_sequence('public.sert', 'id'), pg_get_serial_sequence('sert', 'x'), 't5'::regclass::oid = (SELECT oid FROM pg_class WHERE relname = 't5'), 'public.t5'::regclass::text, '"t5"'::regclass::text`,
  drizzle: fs.readFileSync('/tmp/probe/dkq.sql', 'utf8').trim().replace(/;$/, ''),
};
for (const [name, text] of Object.entries(parts)) {
  const snap = pointAtSnapshot(rw.rewrite(text, tokenize(text)), CATALOG_READERS);
  const ts = []; let rows; for (let k=0;k<3;k++){ let s=performance.now(); const p = await c.prepare(snap); const tp=performance.now()-s; s=performance.now(); rows = await p.runAndReadAll(); ts.push([tp, performance.now()-s]); }
  console.log(name.padEnd(16), ts.map(([a,b])=>`${a.toFixed(1)}/${b.toFixed(1)}`).join('  '), name === 'sert' ? JSON.stringify(rows.getRows()) : '');
}
