import { loadModule } from 'libpg-query';
await loadModule();
import { CompatRewriter } from './dist/engines/duckdb/catalog/rewrite.js';
import { tokenize as lex } from './dist/sql/lexer.js';
const r = new CompatRewriter();
for (const s of process.argv.slice(2)) console.log(r.rewrite(s, lex(s)));
