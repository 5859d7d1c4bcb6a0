/** Frontend messages, named and shaped as in the protocol documentation. */

export interface StartupMessage {
  readonly kind: 'StartupMessage';
  readonly protocolVersion: number;
  readonly parameters: ReadonlyMap<string, string>;
}
export interface SSLRequest {
  readonly kind: 'SSLRequest';
}
export interface GSSENCRequest {
  readonly kind: 'GSSENCRequest';
}
export interface CancelRequest {
  readonly kind: 'CancelRequest';
  readonly processId: number;
  readonly secretKey: number;
}
export type StartupPacket = StartupMessage | SSLRequest | GSSENCRequest | CancelRequest;

export interface Query {
  readonly kind: 'Query';
  readonly sql: string;
}
export interface Parse {
  readonly kind: 'Parse';
  readonly name: string;
  readonly sql: string;
  readonly parameterTypes: readonly number[];
}
export interface Bind {
  readonly kind: 'Bind';
  readonly portal: string;
  readonly statement: string;
  /** 0 = text, 1 = binary; empty means all text, one entry applies to all. */
  readonly parameterFormats: readonly number[];
  readonly parameters: readonly (Buffer | null)[];
  readonly resultFormats: readonly number[];
}
export interface Describe {
  readonly kind: 'Describe';
  readonly target: 'S' | 'P';
  readonly name: string;
}
export interface Execute {
  readonly kind: 'Execute';
  readonly portal: string;
  /** 0 means no limit. */
  readonly maxRows: number;
}
export interface Close {
  readonly kind: 'Close';
  readonly target: 'S' | 'P';
  readonly name: string;
}
export interface Sync {
  readonly kind: 'Sync';
}
export interface Flush {
  readonly kind: 'Flush';
}
export interface Terminate {
  readonly kind: 'Terminate';
}
/** PasswordMessage, SASLInitialResponse and SASLResponse share a type byte; the session knows which it expects. */
export interface PasswordData {
  readonly kind: 'PasswordData';
  readonly data: Buffer;
}
export interface CopyData {
  readonly kind: 'CopyData';
  readonly data: Buffer;
}
export interface CopyDone {
  readonly kind: 'CopyDone';
}
export interface CopyFail {
  readonly kind: 'CopyFail';
  readonly message: string;
}
export interface FunctionCall {
  readonly kind: 'FunctionCall';
}

export type FrontendMessage =
  | Query
  | Parse
  | Bind
  | Describe
  | Execute
  | Close
  | Sync
  | Flush
  | Terminate
  | PasswordData
  | CopyData
  | CopyDone
  | CopyFail
  | FunctionCall;

/** One column of a RowDescription. */
export interface FieldDescription {
  readonly name: string;
  readonly tableOid: number;
  readonly columnAttr: number;
  readonly typeOid: number;
  readonly typeSize: number;
  readonly typeModifier: number;
  readonly format: 0 | 1;
}
