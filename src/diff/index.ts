// The diff module: pure (before, after) -> Change[], and the content hash that agrees with it.
export type { Change, DiffOptions } from './types.js';
export { compileDiffOptions, diff, DiffOptionsError, resolveDiffOptions } from './diff.js';
export type { CompiledDiffOptions, VolatileNode } from './diff.js';
export { canonicalJson, contentHash } from './hash.js';
