import type http from 'node:http';
import { decodeTraces, encodeResponse, encodeStatus, encodingOf, inflate, OtlpRequestError, type OtlpEncoding } from '../otlp/decode.js';
import { IngestUnavailable, ingestSpans } from '../otlp/ingest.js';
import type { Authenticated, HttpContext } from './listener.js';

/**
 * `POST /v1/traces`, as OTLP/HTTP defines it: 200 with a partial success naming what was rejected, 400 for a body
 * that cannot be read, 413 past otlp.maxBodyBytes, 415 for an encoding it does not define, 503 (retryable) while
 * the engine cannot take the rows. Nothing is written for a body answered 4xx.
 */
export async function ingestTraces(ctx: HttpContext, who: Authenticated, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const encoding = encodingOf(req.headers['content-type']);
  if (encoding === null) {
    answer(
      res,
      'json',
      415,
      encodeStatus('json', 3, `Content-Type must be application/x-protobuf or application/json, not "${req.headers['content-type'] ?? ''}"`),
    );
    return;
  }
  const max = ctx.config.otlp.maxBodyBytes;
  let spans: ReturnType<typeof decodeTraces>;
  try {
    const body = await readBody(req, max);
    spans = decodeTraces(inflate(body, req.headers['content-encoding'], max), encoding);
  } catch (err) {
    if (!(err instanceof OtlpRequestError)) throw err;
    ctx.prometheus.otlpRequest(String(err.status));
    // A body left unread would be taken for the next request's start.
    answer(res, encoding, err.status, encodeStatus(encoding, 3, err.message), err.status === 413);
    return;
  }
  const grants = ctx.auth.grantsOf(who.user);
  let lease: Awaited<ReturnType<typeof ctx.clients.acquire>>;
  try {
    lease = await ctx.clients.acquire(who.user, who.address);
  } catch (err) {
    unavailable(ctx, res, encoding, err);
    return;
  }
  let broken = true;
  try {
    const result = await ingestSpans(spans, lease.client, {
      nonGenAiSpans: ctx.config.otlp.nonGenAiSpans,
      stampedAgent: grants.identity['agent_id'] !== undefined,
      maxContentBytes: ctx.config.ledger.maxContentBytes,
      index: ctx.spanIndex,
      user: who.user,
    });
    broken = false;
    ctx.prometheus.otlpSpans({ appended: result.appended, duplicate: result.duplicates, dropped: result.dropped, rejected: result.rejected.length });
    const all = spans.spans.length + spans.invalid.length;
    if (result.rejected.length > 0) {
      ctx.log.warn({ user: who.user, rejected: result.rejected.length, first: result.rejected[0] }, `OTLP: ${result.rejected.length} of ${all} spans rejected`);
    }
    // Refused for who the user is (a reader), every span alike: 403, which an exporter does not retry.
    if (result.rejected.length > 0 && result.rejected.length === all && result.rejected.every((r) => r.sqlstate === '42501')) {
      ctx.prometheus.otlpRequest('403');
      answer(res, encoding, 403, encodeStatus(encoding, 7, result.rejected[0]?.reason ?? 'permission denied'));
      return;
    }
    ctx.prometheus.otlpRequest('200');
    const message = result.rejected
      .slice(0, 10)
      .map((r) => `${r.span}: ${r.reason}`)
      .join('; ');
    const more = result.rejected.length > 10 ? `; and ${result.rejected.length - 10} more` : '';
    answer(res, encoding, 200, encodeResponse(encoding, result.rejected.length, message + more));
  } catch (err) {
    if (!(err instanceof IngestUnavailable)) throw err;
    unavailable(ctx, res, encoding, err);
  } finally {
    lease.release(broken);
  }
}

function unavailable(ctx: HttpContext, res: http.ServerResponse, encoding: OtlpEncoding, err: unknown): void {
  ctx.prometheus.otlpRequest('503');
  ctx.log.warn({ err: (err as Error).message }, 'OTLP: the ledger cannot take spans now; the exporter is told to retry');
  res.setHeader('retry-after', '5');
  answer(res, encoding, 503, encodeStatus(encoding, 14, `the ledger cannot take spans now: ${(err as Error).message}`));
}

function answer(res: http.ServerResponse, encoding: OtlpEncoding, status: number, body: Buffer, close = false): void {
  res.writeHead(status, {
    'content-type': encoding === 'json' ? 'application/json' : 'application/x-protobuf',
    'content-length': body.length,
    ...(close ? { connection: 'close' } : {}),
  });
  res.end(body);
}

/** The whole body, or 413 as soon as it is known to be larger than `max`. */
function readBody(req: http.IncomingMessage, max: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  if (declared > max) return Promise.reject(new OtlpRequestError(413, `the body is ${declared} bytes, more than ${max} (otlp.maxBodyBytes)`));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > max) {
        req.off('data', onData);
        req.pause();
        reject(new OtlpRequestError(413, `the body is more than ${max} bytes (otlp.maxBodyBytes)`));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
  });
}
