import { celEnv, parse, plan, type CelResult } from '@bufbuild/cel';

/**
 * The one CEL environment of hostwatch: rule conditions, route matches and silence
 * matches all compile here, once, and run many times.
 */
const env = celEnv();

/** A planned CEL expression. */
export type CelProgram = (bindings: Record<string, unknown>) => CelResult;

/** Parse a CEL expression; throws the parser's error, which names the position. */
export const parseCel = parse;

/** Plan a parsed expression for repeated evaluation. */
export function planCel(ast: ReturnType<typeof parse>): CelProgram {
  return plan(env, ast) as CelProgram;
}

/** Parse and plan in one step (throws on a syntax error). */
export function compileCel(expr: string): CelProgram {
  return planCel(parse(expr));
}
