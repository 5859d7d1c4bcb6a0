import type { BindValue } from '../../../engine/port.js';

/**
 * A Bind message with a result format per column, as the client asked.
 * node-postgres' serializer (pg-protocol's) takes one flag for all the
 * results (text or binary); a client that mixes formats would otherwise have
 * its binary columns made by cotwire from PostgreSQL's text, which not every
 * type allows. A Buffer value goes in binary, as the client sent it; a
 * string in text.
 */
export function bindMessage(portal: string, statement: string, values: readonly BindValue[], resultFormats: readonly number[]): Buffer {
  const portalBytes = Buffer.from(portal, 'utf8');
  const statementBytes = Buffer.from(statement, 'utf8');
  const cells = values.map((v) => (v === null ? null : typeof v === 'string' ? Buffer.from(v, 'utf8') : v));
  const binaryParams = values.some((v) => Buffer.isBuffer(v));
  let length = 4 + portalBytes.length + 1 + statementBytes.length + 1;
  length += 2 + (binaryParams ? 2 * values.length : 0);
  length += 2;
  for (const c of cells) length += 4 + (c === null ? 0 : c.length);
  length += 2 + 2 * resultFormats.length;
  const out = Buffer.allocUnsafe(1 + length);
  let at = out.writeUInt8(0x42, 0);
  at = out.writeInt32BE(length, at);
  at += portalBytes.copy(out, at);
  at = out.writeUInt8(0, at);
  at += statementBytes.copy(out, at);
  at = out.writeUInt8(0, at);
  if (binaryParams) {
    at = out.writeInt16BE(values.length, at);
    for (const v of values) at = out.writeInt16BE(Buffer.isBuffer(v) ? 1 : 0, at);
  } else at = out.writeInt16BE(0, at);
  at = out.writeInt16BE(cells.length, at);
  for (const c of cells) {
    if (c === null) at = out.writeInt32BE(-1, at);
    else {
      at = out.writeInt32BE(c.length, at);
      at += c.copy(out, at);
    }
  }
  at = out.writeInt16BE(resultFormats.length, at);
  for (const f of resultFormats) at = out.writeInt16BE(f, at);
  return out;
}
