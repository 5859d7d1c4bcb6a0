import { type Embedder, normalize } from './provider.js';

/**
 * The built-in embedder: no network, no model, no download. A text becomes a
 * hashed bag of its word stems and of its adjacent stem pairs ("the hashing
 * trick"), with sublinear term weighting, normalised to unit length.
 *
 * What it measures is lexical similarity: two steps are close when they share
 * words (after light stemming) and, more so, word pairs. It knows nothing of
 * meaning: "refund" does not match "reimburse", "login" does not match
 * "sign-in", and a paraphrase with different words scores near zero. It is
 * good enough to find the step that talks about "pricing decisions" among
 * thousands, and cheap enough to embed every step in the background. When
 * semantic recall matters, switch to the `openai` provider, pointed at any
 * service speaking OpenAI's embeddings API (Ollama, vLLM, TEI, or OpenAI).
 */
export class HashedEmbedder implements Embedder {
  readonly model = 'cotwire-hashed-v1';
  // Each batch holds the event loop for its whole run: 64 short texts take about 1.5 ms.
  readonly batchSize = 64;
  readonly dimensions: number;
  // Reused across calls (embedNow is synchronous, so never re-entered), to spare two allocations per text.
  private stems: Uint32Array = new Uint32Array(64);
  private pairs: Uint32Array = new Uint32Array(64);

  constructor({ dimensions = 384 }: { dimensions?: number } = {}) {
    if (!Number.isInteger(dimensions) || dimensions < 1) throw new RangeError(`dimensions must be a positive integer, not ${dimensions}`);
    this.dimensions = dimensions;
  }

  embed(texts: readonly string[]): Promise<Float32Array[]> {
    return Promise.resolve(texts.map((t) => this.embedNow(t)));
  }

  embedNow(text: string): Float32Array {
    let n = 0;
    let prev = 0;
    for (const match of text.toLowerCase().matchAll(WORD)) {
      const word = match[0];
      if (STOP_WORDS.has(word)) continue;
      const h = fnv1a(stem(word));
      if (n === this.stems.length) {
        this.stems = grown(this.stems);
        this.pairs = grown(this.pairs);
      }
      this.stems[n] = h;
      // Unordered, so "schema migration" matches "migrating the schema"; stop words do not break a pair.
      if (n > 0) this.pairs[n - 1] = prev < h ? pairHash(prev, h) : pairHash(h, prev);
      prev = h;
      n++;
    }
    const v = new Float32Array(this.dimensions);
    accumulate(v, this.stems.subarray(0, n), 1);
    accumulate(v, this.pairs.subarray(0, Math.max(0, n - 1)), PAIR_WEIGHT);
    return normalize(v);
  }
}

function grown(a: Uint32Array): Uint32Array {
  const b = new Uint32Array(a.length * 2);
  b.set(a);
  return b;
}

const WORD = /[\p{L}\p{N}]+/gu;

// A pair is rarer and more specific than a word, but counting it fully would let word order outweigh vocabulary.
const PAIR_WEIGHT = 0.5;

// Frequent English function words: they match everywhere, so they would only add noise. "not" and "no" are kept on purpose,
// as a reasoning step's negation is worth matching.
const STOP_WORDS = new Set(
  (
    'a about above after again against all also am an and any are as at be because been before being below between both but by ' +
    'can could did do does doing down during each few for from further had has have having he her here hers him his how i if in ' +
    'into is it its itself just me more most my myself of off on once only or other our ours out over own same she should so some ' +
    'such than that the their theirs them then there these they this those through to too under until up very was we were what ' +
    'when where which while who whom why will with would you your yours'
  ).split(' '),
);

const MIN_STEM = 3;

/**
 * A deliberately light, deterministic suffix stripper for English inflections, so that "prices/pricing/priced/price",
 * "decision/decisions" and "retry/retries/retried/retrying" share a feature. One of -ies/-ied (to -y), -ing, -ed, -s is
 * removed, then a doubled final consonant ("running" → "run") and a final -e ("price" → "pric"), never leaving fewer than
 * three characters. Its limits: no derivational suffixes ("failure" ≠ "fail", "migration" ≠ "migrate", "deployment" ≠
 * "deploy"); occasional false merges ("string" → "str", "news" → "new"); English only (other scripts pass through whole,
 * and a script written without spaces becomes one token per run of letters).
 */
export function stem(word: string): string {
  let w = word;
  const n = w.length;
  if (n <= MIN_STEM) return w;
  if ((w.endsWith('ies') || w.endsWith('ied')) && n - 3 >= MIN_STEM - 1) w = `${w.slice(0, -3)}y`;
  else if (w.endsWith('ing') && n - 3 >= MIN_STEM) w = undouble(w.slice(0, -3));
  else if (w.endsWith('ed') && !w.endsWith('eed') && n - 2 >= MIN_STEM) w = undouble(w.slice(0, -2));
  else if (w.endsWith('s') && !w.endsWith('ss') && !w.endsWith('us') && !w.endsWith('is') && n - 1 >= MIN_STEM) w = w.slice(0, -1);
  if (w.length > MIN_STEM && w.endsWith('e')) w = w.slice(0, -1);
  return w;
}

function undouble(w: string): string {
  const n = w.length;
  if (n <= MIN_STEM) return w;
  const last = w.charCodeAt(n - 1);
  // ll, ss and zz are usually part of the word itself ("called", "missing", "buzzing"), not doubled for the suffix.
  if (last === w.charCodeAt(n - 2) && last >= 98 && last <= 122 && !'aeiouylsz'.includes(w[n - 1] as string)) return w.slice(0, -1);
  return w;
}

/** FNV-1a over UTF-16 code units: fast, and the same on every platform. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** MurmurHash3's finaliser: spreads FNV's weak high bits, so that the bucket and the sign are independent. */
function fmix32(x: number): number {
  let h = x;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function pairHash(a: number, b: number): number {
  // The odd constant keeps a pair's hash from coinciding with a word's (a word hashes a string, a pair hashes two hashes).
  return fmix32(Math.imul(a, 0x9e3779b1) ^ b ^ 0x5bd1e995);
}

/**
 * Adds each distinct feature, weighted by 1 + ln(its count), to one bucket with a hashed sign, so that colliding features
 * cancel in expectation rather than pile up. Sorting groups equal features without a Map (and sorts the caller's buffer).
 */
function accumulate(v: Float32Array, features: Uint32Array, weight: number): void {
  features.sort();
  const dims = v.length;
  for (let i = 0; i < features.length; ) {
    const feature = features[i] as number;
    let j = i + 1;
    while (j < features.length && features[j] === feature) j++;
    const h = fmix32(feature);
    const b = (h & 0x7fffffff) % dims;
    const w = weight * (1 + Math.log(j - i));
    v[b] = (v[b] as number) + (h & 0x80000000 ? -w : w);
    i = j;
  }
}
