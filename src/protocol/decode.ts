import { protocolViolation } from '../errors/pg-error.js';
import { FrontendCode, StartupCode } from './codes.js';
import type { FrontendMessage, StartupPacket } from './messages.js';
import { MessageReader } from './reader.js';

/** Decodes the body of a startup-phase packet (after its length word). */
export function decodeStartupPacket(body: Buffer): StartupPacket {
  const r = new MessageReader(body);
  const version = r.int32();
  switch (version) {
    case StartupCode.SSLRequest:
      r.expectEnd('SSLRequest');
      return { kind: 'SSLRequest' };
    case StartupCode.GSSENCRequest:
      r.expectEnd('GSSENCRequest');
      return { kind: 'GSSENCRequest' };
    case StartupCode.CancelRequest: {
      const processId = r.int32();
      const secretKey = r.int32();
      r.expectEnd('CancelRequest');
      return { kind: 'CancelRequest', processId, secretKey };
    }
  }
  const major = version >>> 16;
  if (major !== 3) {
    throw protocolViolation(`unsupported frontend protocol ${major}.${version & 0xffff}: server supports 3.0 to 3.0`);
  }
  const parameters = new Map<string, string>();
  for (;;) {
    const name = r.cstring();
    if (name === '') break;
    parameters.set(name, r.cstring());
  }
  r.expectEnd('StartupMessage');
  return { kind: 'StartupMessage', protocolVersion: version, parameters };
}

function target(byte: number, what: string): 'S' | 'P' {
  if (byte === 0x53) return 'S';
  if (byte === 0x50) return 'P';
  throw protocolViolation(`invalid ${what} message subtype ${byte}`);
}

/** Decodes a typed message body. Unknown codes and malformed bodies are FATAL 08P01. */
export function decodeFrontendMessage(code: number, body: Buffer): FrontendMessage {
  const r = new MessageReader(body);
  switch (code) {
    case FrontendCode.Query: {
      const sql = r.cstring();
      r.expectEnd('Query');
      return { kind: 'Query', sql };
    }
    case FrontendCode.Parse: {
      const name = r.cstring();
      const sql = r.cstring();
      const n = r.count16(4, 'parameter type');
      const parameterTypes: number[] = new Array<number>(n);
      for (let i = 0; i < n; i++) parameterTypes[i] = r.uint32();
      r.expectEnd('Parse');
      return { kind: 'Parse', name, sql, parameterTypes };
    }
    case FrontendCode.Bind: {
      const portal = r.cstring();
      const statement = r.cstring();
      const nf = r.count16(2, 'parameter format');
      const parameterFormats: number[] = new Array<number>(nf);
      for (let i = 0; i < nf; i++) parameterFormats[i] = r.int16();
      const np = r.count16(4, 'parameter');
      const parameters: (Buffer | null)[] = new Array<Buffer | null>(np);
      for (let i = 0; i < np; i++) {
        const len = r.int32();
        if (len < -1) throw protocolViolation(`invalid parameter length ${len}`);
        parameters[i] = len === -1 ? null : r.bytes(len);
      }
      const nr = r.count16(2, 'result format');
      const resultFormats: number[] = new Array<number>(nr);
      for (let i = 0; i < nr; i++) resultFormats[i] = r.int16();
      r.expectEnd('Bind');
      return { kind: 'Bind', portal, statement, parameterFormats, parameters, resultFormats };
    }
    case FrontendCode.Describe: {
      const t = target(r.byte(), 'Describe');
      const name = r.cstring();
      r.expectEnd('Describe');
      return { kind: 'Describe', target: t, name };
    }
    case FrontendCode.Execute: {
      const portal = r.cstring();
      const maxRows = r.int32();
      r.expectEnd('Execute');
      return { kind: 'Execute', portal, maxRows: Math.max(0, maxRows) };
    }
    case FrontendCode.Close: {
      const t = target(r.byte(), 'Close');
      const name = r.cstring();
      r.expectEnd('Close');
      return { kind: 'Close', target: t, name };
    }
    case FrontendCode.Sync:
      r.expectEnd('Sync');
      return { kind: 'Sync' };
    case FrontendCode.Flush:
      r.expectEnd('Flush');
      return { kind: 'Flush' };
    case FrontendCode.Terminate:
      r.expectEnd('Terminate');
      return { kind: 'Terminate' };
    case FrontendCode.Password:
      return { kind: 'PasswordData', data: r.rest() };
    case FrontendCode.CopyData:
      return { kind: 'CopyData', data: r.rest() };
    case FrontendCode.CopyDone:
      return { kind: 'CopyDone' };
    case FrontendCode.CopyFail: {
      const message = r.cstring();
      return { kind: 'CopyFail', message };
    }
    case FrontendCode.FunctionCall:
      return { kind: 'FunctionCall' };
    default:
      throw protocolViolation(`invalid frontend message type ${code}`);
  }
}
