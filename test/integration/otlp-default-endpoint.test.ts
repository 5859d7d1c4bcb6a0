import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { startTestServer } from '../fixtures/server.js';

/**
 * An exporter with no setting at all sends to OTLP/HTTP's default endpoint, http://localhost:4318/v1/traces:
 * cotwire's HTTP listener is there by default. The only test that takes the fixed port; every other one listens
 * on port 0.
 */
describe('the default OTLP endpoint', () => {
  it('takes the spans of an exporter given no endpoint, header or protocol', async () => {
    for (const k of Object.keys(process.env)) if (k.startsWith('OTEL_')) delete process.env[k];
    await using server = await startTestServer({ http: { host: '127.0.0.1', port: 4318 } });
    expect(server.running.httpAddress?.port).toBe(4318);
    const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] });
    provider
      .getTracer('agent')
      .startSpan('chat gpt-4o', {
        attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.conversation.id': 'default-endpoint', 'gen_ai.request.model': 'gpt-4o' },
      })
      .end();
    await provider.forceFlush();
    await provider.shutdown();
    const c = await server.client();
    const r = await c.query("SELECT step_type, model FROM _cot_steps WHERE session_id = 'default-endpoint'");
    expect(r.rows).toEqual([{ step_type: 'Reasoning', model: 'gpt-4o' }]);
    expect((await c.query("SELECT valid FROM cot_verify('default-endpoint')")).rows).toEqual([{ valid: true }]);
  });
});
