import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Observer } from '../observe/observer.js';

/** Prometheus metrics for one server process. */
export class PrometheusObserver implements Observer {
  readonly registry = new Registry();
  private readonly open = new Gauge({ name: 'cotwire_connections_open', help: 'Client connections open now', registers: [this.registry] });
  private readonly total = new Counter({ name: 'cotwire_connections_total', help: 'Client connections accepted', registers: [this.registry] });
  private readonly statements = new Counter({
    name: 'cotwire_statements_total',
    help: 'Statements run, by kind and outcome',
    labelNames: ['kind', 'outcome'],
    registers: [this.registry],
  });
  private readonly refusals = new Counter({
    name: 'cotwire_refusals_total',
    help: 'Statements refused by the guard or by a role, by operation and reason',
    labelNames: ['operation', 'reason'],
    registers: [this.registry],
  });
  private readonly appendSeconds = new Histogram({
    name: 'cotwire_ledger_append_seconds',
    help: 'Time from an append reaching the writer to its commit',
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  private readonly groupUnits = new Histogram({
    name: 'cotwire_group_commit_units',
    help: 'Append units (statements or transactions) sharing one commit',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
    registers: [this.registry],
  });
  private readonly verified = new Counter({
    name: 'cotwire_chains_verified_total',
    help: 'Chains verified by the background audit',
    registers: [this.registry],
  });
  private readonly verificationFailures = new Counter({
    name: 'cotwire_verification_failures_total',
    help: 'Problems found by background audits (each audit counts what it finds), by kind: missing, altered, unlogged, edited, deleted, inserted, reordered, ledger_missing, ledger_changed, log_stopped',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  private readonly findings = new Gauge({
    name: 'cotwire_audit_findings',
    help: 'Problems the latest audit found, by kind',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  private readonly lastAudit = new Gauge({
    name: 'cotwire_audit_last_completed_seconds',
    help: 'When the latest audit completed (Unix time)',
    registers: [this.registry],
  });
  private readonly appendedRows = new Counter({ name: 'cotwire_ledger_rows_appended_total', help: 'Ledger rows appended', registers: [this.registry] });
  private readonly embeddingDepth = new Gauge({
    name: 'cotwire_embedding_queue_depth',
    help: 'Steps selected for an embedding that have no vector yet',
    registers: [this.registry],
  });
  private readonly embeddedSteps = new Counter({
    name: 'cotwire_embedded_steps_total',
    help: 'Vectors written to _cot_embeddings',
    registers: [this.registry],
  });
  private readonly embeddingErrors = new Counter({
    name: 'cotwire_embedding_errors_total',
    help: 'Embedding provider failures, by kind: retry (a request tried again), unavailable (a batch failed after every retry), rejected (a step the provider refused, skipped)',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  private readonly embeddingSeconds = new Histogram({
    name: 'cotwire_embedding_request_seconds',
    help: 'Requests to the embedding provider, by outcome',
    labelNames: ['outcome'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  private readonly otlpRequests = new Counter({
    name: 'cotwire_otlp_requests_total',
    help: 'OTLP export requests at POST /v1/traces, by HTTP status',
    labelNames: ['status'],
    registers: [this.registry],
  });
  private readonly otlpSpanCount = new Counter({
    name: 'cotwire_otlp_spans_total',
    help: 'OTLP spans received, by outcome: appended, duplicate (already in the ledger: a retried export), dropped (not a GenAI span, under otlp.nonGenAiSpans: drop), rejected',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  otlpRequest(status: string): void {
    this.otlpRequests.inc({ status });
  }

  otlpSpans(counts: Readonly<Record<'appended' | 'duplicate' | 'dropped' | 'rejected', number>>): void {
    for (const [outcome, n] of Object.entries(counts)) if (n > 0) this.otlpSpanCount.inc({ outcome }, n);
  }

  connectionOpened(): void {
    this.open.inc();
    this.total.inc();
  }

  connectionClosed(): void {
    this.open.dec();
  }

  statement(kind: string, ok: boolean): void {
    this.statements.inc({ kind, outcome: ok ? 'ok' : 'error' });
  }

  refusal(operation: string, reason: string): void {
    this.refusals.inc({ operation, reason });
  }

  audited(chains: number, findings: ReadonlyArray<{ readonly kind: string }>): void {
    this.verified.inc(chains);
    this.findings.reset();
    for (const f of findings) {
      // A recorded loss is shown, as a gap, at every audit; it is not a new failure each time.
      if (f.kind !== 'gap') this.verificationFailures.inc({ kind: f.kind });
      this.findings.inc({ kind: f.kind });
    }
    this.lastAudit.set(Date.now() / 1000);
  }

  embeddingQueue(depth: number): void {
    this.embeddingDepth.set(depth);
  }

  stepsEmbedded(count: number): void {
    this.embeddedSteps.inc(count);
  }

  embeddingFailed(kind: 'retry' | 'unavailable' | 'rejected'): void {
    this.embeddingErrors.inc({ kind });
  }

  embeddingRequest(seconds: number, ok: boolean): void {
    this.embeddingSeconds.observe({ outcome: ok ? 'ok' : 'error' }, seconds);
  }

  appendsCommitted(units: number, rows: number, seconds: number): void {
    this.groupUnits.observe(units);
    this.appendedRows.inc(rows);
    this.appendSeconds.observe(seconds);
  }
}
