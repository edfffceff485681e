/**
 * An A/B of the pipeline part: two builds of hostwatch loaded in one process, their
 * benchPipeline() run alternately, so both see the same minutes of a noisy machine.
 *
 *   git worktree add /tmp/before <commit> && ln -s "$PWD/node_modules" /tmp/before/ && (cd /tmp/before && npx tsc -p .)
 *   node --expose-gc dist/bench/ab.js /tmp/before/dist [pairs]
 *
 * Prints, per run, the ratios of unchanged, changed-10%, baseline and baseline-all-online,
 * the CPU-only ingest times and the baseline's bare and poll passes; then the medians.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { median } from './common.js';
import type { PipelineOptions, PipelineResult } from './pipeline.js';

type Bench = (opts?: PipelineOptions) => Promise<PipelineResult>;

const [other, pairsArg] = process.argv.slice(2);
if (!other) {
  process.stderr.write('usage: node --expose-gc dist/bench/ab.js OTHER_DIST [pairs]\n');
  process.exit(2);
}
const pairs = Number(pairsArg ?? 4);
if (!Number.isInteger(pairs) || pairs < 1) {
  process.stderr.write(`pairs must be a whole number of at least 1, not ${pairsArg}\n`);
  process.exit(2);
}
const load = async (dist: string): Promise<Bench> =>
  ((await import(pathToFileURL(resolve(dist, 'bench/pipeline.js')).href)) as { benchPipeline: Bench }).benchPipeline;
const arms: Array<[string, Bench]> = [
  ['other', await load(other)],
  ['this', await load(resolve(import.meta.dirname, '..'))],
];
const CASES = ['unchanged', 'changed-10%', 'baseline', 'baseline, all online'] as const;
const rows: Record<string, number[][]> = {};
process.stdout.write(`arm     ${CASES.join(' | ')} | CPU-only ingest ms (unchanged, changed, baseline) | baseline bare/poll ms\n`);
for (let i = 0; i < pairs; i++) {
  for (const [name, bench] of arms) {
    const r = await bench({});
    const get = (c: string) => r.cases.find((x) => x.case === c)!;
    const ratios = CASES.map((c) => get(c).ratio);
    (rows[name] ??= []).push(ratios);
    const b = get('baseline');
    process.stdout.write(`${name.padEnd(6)}  ${ratios.map((x) => x.toFixed(2)).join('  ')} | ${r.cpu.map((c) => c.ingestCpuMs).join(' ')} | ${b.bareMedianMs} / ${b.pollMedianMs}\n`);
  }
}
for (const [name, rs] of Object.entries(rows)) {
  process.stdout.write(`median ${name.padEnd(6)} ${CASES.map((_, i) => median(rs.map((r) => r[i]!)).toFixed(2)).join('  ')}\n`);
}
