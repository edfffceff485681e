/**
 * YAML text -> plain data, with `${VAR}` resolved and the source position of every key and
 * value kept, so later checks can point at line and column by key path.
 */
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from 'yaml';
import { substituteEnv, type Env } from './env.js';
import { formatPath, type ConfigError } from './errors.js';

const MAX_ALIASES = 1_000;

export type KeyPath = readonly (string | number)[];

export interface Position {
  line: number;
  column: number;
}

export interface YamlTree {
  /** The document as plain data (maps are plain objects, sequences arrays); null for an empty file. */
  data: unknown;
  /** YAML syntax errors, failed `${VAR}` substitutions and unresolved aliases. */
  errors: ConfigError[];
  /** True if the file is not valid YAML: `data` is then incomplete and should not be checked. */
  syntaxFailed: boolean;
  /** Written paths (`api.key`) whose `${VAR}` or alias failed: more errors about them would be noise. */
  unresolved: ReadonlySet<string>;
  /** Where the value at `path` starts; for a missing key, where its nearest written parent starts. */
  valueAt(path: KeyPath): Position;
  /** Where the key of `path` is written (falls back to valueAt). */
  keyAt(path: KeyPath): Position;
  /**
   * The text written at `path` when it holds a `${VAR}` reference (`${HOSTWATCH_API_KEY}`):
   * errors show this instead of the value, which may be a secret written into the wrong key.
   */
  writtenAt(path: KeyPath): string | undefined;
}

/**
 * `${VAR}` written unquoted inside a flow map (`{ url: ${SLACK_WEBHOOK_URL} }`, as in the
 * product's own example) is not valid YAML: `{` opens a map. Before parsing, the braces of
 * each reference become two private-use characters (same length, so positions hold); they
 * are turned back in each string value just before substitution. Substitution still runs
 * after parsing, so a variable's value can never change the structure of the file. A
 * reference holds no quote: in `key: "${BASE"}` the `}` closes the flow map, and the `${`
 * that is never closed is the value's problem to report, not a YAML syntax error.
 */
const OPEN = '\uE000';
const CLOSE = '\uE001';
const REFERENCE_IN_TEXT = /(?<!\$)\$\{([^{}\n"']*)\}/g;

function protectReferences(text: string): string {
  return text.replace(REFERENCE_IN_TEXT, `$${OPEN}$1${CLOSE}`);
}

function restoreReferences(value: string): string {
  return value.includes(OPEN) ? value.replaceAll(OPEN, '{').replaceAll(CLOSE, '}') : value;
}

export interface ReadOptions {
  /** A value for a path whose `${VAR}` is unset (instead of an error); null: it stays an error. */
  placeholder?: (path: KeyPath) => string | null;
}

/** Parses YAML text into plain data plus source positions; `${VAR}` is resolved from env. */
export function readYamlTree(text: string, file: string, env: Env, opts: ReadOptions = {}): YamlTree {
  const lineCounter = new LineCounter();
  const doc = parseDocument(protectReferences(text), { lineCounter, prettyErrors: false, uniqueKeys: true });
  const toPosition = (offset: number): Position => {
    const { line, col } = lineCounter.linePos(offset);
    return { line, column: col };
  };
  const values = new Map<string, number>();
  const keys = new Map<string, number>();
  const written = new Map<string, string>();
  const unresolved = new Set<string>();
  const errors: ConfigError[] = [];
  // Aliases are expanded while walking; a cap keeps a "billion laughs" file from blowing up.
  let aliasesLeft = MAX_ALIASES;

  const syntaxErrors = readSyntaxErrors(doc, text, toPosition, file);
  if (syntaxErrors.length > 0) errors.push(...syntaxErrors);

  const walk = (node: Node | null, path: KeyPath, fallbackOffset: number, depth: number): unknown => {
    if (node === null) {
      values.set(pathKey(path), fallbackOffset);
      return null;
    }
    if (depth > 64) {
      errors.push({ file, ...toPosition(node.range?.[0] ?? fallbackOffset), path: formatPath(path), message: 'is nested too deeply (more than 64 levels)' });
      return null;
    }
    const start = node.range?.[0] ?? fallbackOffset;
    // An empty value (`key:`) has a zero-length node right after the colon; point at the key instead.
    const emptyScalar = isScalar(node) && node.range != null && node.range[0] === node.range[1];
    values.set(pathKey(path), emptyScalar ? fallbackOffset : start);
    if (isAlias(node)) {
      if (--aliasesLeft < 0) {
        if (aliasesLeft === -1) errors.push({ file, ...toPosition(start), path: formatPath(path), message: `uses more than ${MAX_ALIASES} aliases (*name); write the values out` });
        return null;
      }
      const target = node.resolve(doc);
      if (target === undefined) {
        errors.push({ file, ...toPosition(start), path: formatPath(path), message: `uses *${node.source}, but no &${node.source} anchor is defined before it` });
        unresolved.add(formatPath(path));
        return null;
      }
      const value = walk(target, path, start, depth + 1);
      values.set(pathKey(path), start); // point at the alias where it is used, not at its anchor
      return value;
    }
    if (isMap(node)) {
      const out: Record<string, unknown> = {};
      for (const pair of node.items) {
        const keyNode = pair.key as Node | null;
        const keyOffset = keyNode?.range?.[0] ?? start;
        // Keys are never substituted; a `${X}` written as a key is shown as written.
        const key = isScalar(keyNode) && keyNode.value !== null ? restoreReferences(String(keyNode.value)) : null;
        if (key === null) {
          errors.push({ file, ...toPosition(keyOffset), path: formatPath(path), message: 'has a key that is not plain text; keys must be names like "timeout"' });
          continue;
        }
        const childPath = [...path, key];
        keys.set(pathKey(childPath), keyOffset);
        // defineProperty, so that a key named "__proto__" is data, not a prototype change.
        Object.defineProperty(out, key, {
          value: walk(pair.value as Node | null, childPath, keyOffset, depth + 1),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
    if (isSeq(node)) {
      return node.items.map((item, index) => walk(item as Node | null, [...path, index], start, depth + 1));
    }
    if (isScalar(node) && typeof node.value === 'string') {
      const raw = restoreReferences(node.value);
      const result = substituteEnv(raw, env);
      if (result.ok && /(?<!\$)\$\{/.test(raw)) written.set(pathKey(path), raw);
      if (result.ok) return result.text;
      const stand = result.unsetOnly ? (opts.placeholder?.(path) ?? null) : null;
      if (stand !== null) return stand;
      unresolved.add(formatPath(path));
      for (const message of result.problems) errors.push({ file, ...toPosition(start), path: formatPath(path), message });
      return '';
    }
    return isScalar(node) ? node.value : null;
  };

  const data = syntaxErrors.length > 0 ? null : walk(doc.contents as Node | null, [], 0, 0);
  const valueAt = (path: KeyPath): Position => {
    for (let end = path.length; end >= 0; end--) {
      const offset = values.get(pathKey(path.slice(0, end)));
      if (offset !== undefined) return toPosition(offset);
    }
    return { line: 1, column: 1 };
  };
  return {
    data,
    errors,
    syntaxFailed: syntaxErrors.length > 0,
    unresolved,
    valueAt,
    keyAt: (path) => {
      const offset = keys.get(pathKey(path));
      return offset === undefined ? valueAt(path) : toPosition(offset);
    },
    writtenAt: (path) => written.get(pathKey(path)),
  };
}

/** A lookup key for a path; JSON keeps ["a.b"] and ["a", "b"] apart. */
function pathKey(path: KeyPath): string {
  return JSON.stringify(path);
}

/** YAML errors as ConfigErrors, at most one per line (later ones on a line are usually echoes). */
function readSyntaxErrors(
  doc: Document,
  text: string,
  toPosition: (offset: number) => Position,
  file: string,
): ConfigError[] {
  const lines = text.split(/\r?\n/);
  const seen = new Set<number>();
  const out: ConfigError[] = [];
  for (const error of doc.errors) {
    const position = toPosition(error.pos[0]);
    if (seen.has(position.line)) continue;
    seen.add(position.line);
    let message: string;
    if (error.code === 'DUPLICATE_KEY') {
      const key = /^("[^"\n]*"|'[^'\n]*'|[^:#\n]*[^:#\s])/.exec(text.slice(error.pos[0]))?.[1] ?? '';
      message = `YAML error: the key ${key.startsWith('"') ? key : JSON.stringify(key.replace(/^'|'$/g, ''))} appears twice in one map; each key may appear only once`;
    } else if (error.code === 'MULTIPLE_DOCS') {
      message = 'YAML error: the file holds more than one document ("---"); a config file is one document';
    } else {
      // Drop a quoted source excerpt some messages end with: it could be part of a secret.
      message = `YAML syntax error: ${error.message.replace(/:?\s*"[^]*"$/, '').replace(/\.$/, '')}`;
    }
    out.push({ file, ...position, path: '', message });
  }
  return out;
}
