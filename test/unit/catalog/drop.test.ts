import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { translateDrop } from '../../../src/engines/duckdb/catalog/drop.js';
import { ParsedStatement } from '../../../src/sql/parsed.js';

const drop = (sql: string) => translateDrop(new ParsedStatement(sql));

beforeAll(async () => {
  await loadModule();
});

describe('DROP of several objects, or of one in public', () => {
  it('becomes one DROP per object, with IF EXISTS and CASCADE kept and public named main', () => {
    expect(drop('DROP TABLE a, B')).toEqual(['DROP TABLE "a"', 'DROP TABLE "b"']);
    expect(drop('DROP TABLE IF EXISTS public.a, "B", s.c CASCADE')).toEqual([
      'DROP TABLE IF EXISTS "main"."a" CASCADE',
      'DROP TABLE IF EXISTS "B" CASCADE',
      'DROP TABLE IF EXISTS "s"."c" CASCADE',
    ]);
    expect(drop('DROP VIEW public.v')).toEqual(['DROP VIEW "main"."v"']);
    expect(drop('DROP SEQUENCE s1, s2 RESTRICT')).toEqual(['DROP SEQUENCE "s1"', 'DROP SEQUENCE "s2"']);
    expect(drop('DROP INDEX public.i')).toEqual(['DROP INDEX "main"."i"']);
  });

  it('leaves DuckDB any other DROP', () => {
    expect(drop('DROP TABLE a')).toBeNull();
    expect(drop('DROP TABLE s.a')).toBeNull();
    expect(drop('DROP SCHEMA a, b')).toBeNull();
    expect(drop('SELECT 1')).toBeNull();
  });
});
