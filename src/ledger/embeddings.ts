/**
 * `_cot_embeddings`: one vector per step of `_cot_steps` selected for an
 * embedding (has_embedding), made by one model at a time. It is derived
 * data: clients read it, only the server writes it (the guard refuses the
 * rest), and `cotwire reembed` rebuilds it from the ledger. The step's
 * session, agent, type and time are copied beside its vector, so that a
 * filtered search reads this table alone and joins only its best hits to
 * the ledger.
 */
export const EMBEDDINGS_TABLE = '_cot_embeddings';

/** What the vector table holds: the model and length of its vectors (null model: no rows yet). */
export interface VectorTableState {
  readonly dimensions: number;
  readonly model: string | null;
}

/** Why the vectors cannot serve the configured model, or null when they can. */
export function vectorMismatch(state: VectorTableState, model: string, dimensions: number): string | null {
  if (state.model === null && state.dimensions === dimensions) return null;
  if (state.model === model && state.dimensions === dimensions) return null;
  return `${EMBEDDINGS_TABLE} holds vectors of ${state.model ?? 'no model'} (${state.dimensions} dimensions), and the configuration asks for ${model} (${dimensions} dimensions); run \`cotwire reembed --model ${model}\` with the server stopped, or configure the model the vectors were made with`;
}

/**
 * The text a step is embedded by: its content, or, for a step without one
 * (a tool call's arguments, a result), its input and output data. Cut at a
 * length every embedding service takes.
 */
export function embeddingText(content: string | null, inputData: string | null, outputData: string | null): string {
  const text = content !== null && content.trim() !== '' ? content : [inputData, outputData].filter((v) => v !== null).join('\n');
  return text.length > MAX_TEXT_CHARS ? text.slice(0, MAX_TEXT_CHARS) : text;
}

/** About 2,000 tokens of English; OpenAI's models take 8,191, and smaller servers often 512 (they truncate). */
export const MAX_TEXT_CHARS = 8000;
