import { createRequire } from 'node:module';
import type { DuckDBDataChunk } from '@duckdb/node-api';

/**
 * A FLOAT[n] column of a chunk, filled with one native copy. The client
 * library takes an array value element by element (about 35 µs for 384
 * floats), and DuckDB's cast of a vector's text costs about 300 µs; an
 * ARRAY vector's child holds the rows' floats back to back, so they are
 * copied there at once.
 */

interface Bindings {
  data_chunk_get_vector(chunk: unknown, column: number): unknown;
  array_vector_get_child(vector: unknown): unknown;
  copy_data_to_vector(target: unknown, targetOffset: number, source: ArrayBuffer, sourceOffset: number, byteCount: number): void;
}

// The copy of the native bindings the client library itself loaded.
const bindings = createRequire(createRequire(import.meta.url).resolve('@duckdb/node-api'))('@duckdb/node-bindings') as Bindings;

/** Sets column `column` (FLOAT[dims], no NULLs) of a chunk created with `vectors.length` rows. */
export function setFloatArrays(chunk: DuckDBDataChunk, column: number, vectors: readonly Float32Array[], dims: number): void {
  const floats = new Float32Array(vectors.length * dims);
  vectors.forEach((v, row) => {
    if (v.length !== dims) throw new Error(`a vector of ${v.length} floats for a FLOAT[${dims}] column`);
    floats.set(v, row * dims);
  });
  const child = bindings.array_vector_get_child(bindings.data_chunk_get_vector(chunk.chunk, column));
  bindings.copy_data_to_vector(child, 0, floats.buffer, 0, floats.byteLength);
}
