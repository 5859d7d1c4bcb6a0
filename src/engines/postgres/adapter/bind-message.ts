import type { BindValue } from '../../../engine/port.js';

/**
 * A Bind message with a result format per column, as the client asked.
 * node-postgres' serializer (pg-protocol's) takes one flag for all the
 * results (text or binary); a client that mixes formats would otherwise have
 * its binary columns made by cotwire from PostgreSQL's text, which not every
 * type allows. Parameters go as the client sent them, in its formats.
 */
export function bindMessage(
  portal: string,
  statement: string,
  params: readonly (Uint8Array | null)[],
  paramFormats: readonly number[],
  resultFormats: readonly number[],
): Buffer {
  const portalBytes = Buffer.from(portal, 'utf8');
  const statementBytes = Buffer.from(statement, 'utf8');
  let length = 4 + portalBytes.length + 1 + statementBytes.length + 1;
  length += 2 + 2 * paramFormats.length + 2;
  for (const p of params) length += 4 + (p === null ? 0 : p.length);
  length += 2 + 2 * resultFormats.length;
  const out = Buffer.allocUnsafe(1 + length);
  let at = out.writeUInt8(0x42, 0);
  at = out.writeInt32BE(length, at);
  at += portalBytes.copy(out, at);
  at = out.writeUInt8(0, at);
  at += statementBytes.copy(out, at);
  at = out.writeUInt8(0, at);
  at = out.writeInt16BE(paramFormats.length, at);
  for (const f of paramFormats) at = out.writeInt16BE(f, at);
  at = out.writeInt16BE(params.length, at);
  for (const p of params) {
    if (p === null) at = out.writeInt32BE(-1, at);
    else {
      at = out.writeInt32BE(p.length, at);
      out.set(p, at);
      at += p.length;
    }
  }
  at = out.writeInt16BE(resultFormats.length, at);
  for (const f of resultFormats) at = out.writeInt16BE(f, at);
  return out;
}

/** Bind values as cotwire holds them (text as strings, binary as bytes), with their formats. */
export function bindOfValues(portal: string, statement: string, values: readonly BindValue[], resultFormats: readonly number[]): Buffer {
  const params = values.map((v) => (v === null ? null : typeof v === 'string' ? Buffer.from(v, 'utf8') : v));
  const formats = values.some((v) => Buffer.isBuffer(v)) ? values.map((v) => (Buffer.isBuffer(v) ? 1 : 0)) : [];
  return bindMessage(portal, statement, params, formats, resultFormats);
}
