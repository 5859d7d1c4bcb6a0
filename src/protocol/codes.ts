/** Message type bytes, https://www.postgresql.org/docs/current/protocol-message-formats.html */
export const FrontendCode = {
  Bind: 0x42, // B
  Close: 0x43, // C
  CopyData: 0x64, // d
  CopyDone: 0x63, // c
  CopyFail: 0x66, // f
  Describe: 0x44, // D
  Execute: 0x45, // E
  Flush: 0x48, // H
  FunctionCall: 0x46, // F
  Parse: 0x50, // P
  Password: 0x70, // p (also SASLInitialResponse and SASLResponse)
  Query: 0x51, // Q
  Sync: 0x53, // S
  Terminate: 0x58, // X
} as const;

export const BackendCode = {
  Authentication: 0x52, // R
  BackendKeyData: 0x4b, // K
  BindComplete: 0x32, // 2
  CloseComplete: 0x33, // 3
  CommandComplete: 0x43, // C
  CopyData: 0x64, // d
  CopyDone: 0x63, // c
  CopyInResponse: 0x47, // G
  CopyOutResponse: 0x48, // H
  DataRow: 0x44, // D
  EmptyQueryResponse: 0x49, // I
  ErrorResponse: 0x45, // E
  NoData: 0x6e, // n
  NoticeResponse: 0x4e, // N
  ParameterDescription: 0x74, // t
  ParameterStatus: 0x53, // S
  ParseComplete: 0x31, // 1
  PortalSuspended: 0x73, // s
  ReadyForQuery: 0x5a, // Z
  RowDescription: 0x54, // T
} as const;

/** Request codes carried in the startup packet's version field. */
export const StartupCode = {
  Protocol3: 196608, // 3.0
  CancelRequest: 80877102,
  SSLRequest: 80877103,
  GSSENCRequest: 80877104,
} as const;

export const AuthCode = {
  Ok: 0,
  CleartextPassword: 3,
  SASL: 10,
  SASLContinue: 11,
  SASLFinal: 12,
} as const;

export type TransactionStatus = 'I' | 'T' | 'E';
