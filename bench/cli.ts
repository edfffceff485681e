/**
 * How long a command takes to start and finish: `hostwatch --version`, `check`, `events` and
 * `deliveries` on a small database, each run as a user runs it (a new `node` process), beside
 * a bare `node -e 0` in the same rounds. Each command loads only what it uses (src/cli.ts), so
 * what is measured is mostly module loading.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openStore } from '../src/store/db.js';
import { benchFile, median, round, tempDir } from './common.js';

export interface CliRow {
  command: string;
  medianMs: number;
  /** Its median over the bare `node -e 0` of the same rounds. */
  ratio: number;
}

export interface CliResult {
  rounds: number;
  bareMs: number;
  rows: CliRow[];
}

export async function benchCli(opts: { rounds?: number; log?: (line: string) => void } = {}): Promise<CliResult> {
  const rounds = opts.rounds ?? 9;
  const { dir, cleanup } = tempDir();
  try {
    const db = join(dir, 'hostwatch.db');
    // A database a daemon created (migrated, empty): `events` and `deliveries` open and read it.
    const store = await openStore({ engine: 'sqlite', path: db }, { now: Date.now });
    await store.close();
    const config = join(dir, 'hostwatch.yaml');
    writeFileSync(config, `api:\n  base_url: http://127.0.0.1:9\n  key: bench-key\nstorage:\n  path: ${db}\n`);
    const cli = benchFile('../src/cli.js');
    const commands: [string, string[]][] = [
      ['node -e 0 (baseline)', ['-e', '0']],
      ['hostwatch --version', [cli, '--version']],
      ['hostwatch check', [cli, 'check', '-c', config]],
      ['hostwatch events', [cli, 'events', '-c', config]],
      ['hostwatch deliveries', [cli, 'deliveries', '-c', config]],
    ];
    const times = commands.map(() => [] as number[]);
    for (let r = 0; r < rounds; r++) {
      // Every command once per round, so each sees the same minutes of the machine.
      commands.forEach(([name, args], i) => {
        const t = performance.now();
        const out = spawnSync(process.execPath, args, { encoding: 'utf8' });
        times[i]!.push(performance.now() - t);
        if (out.status !== 0) throw new Error(`${name}: exit ${out.status}: ${out.stderr.slice(0, 300)}`);
      });
      opts.log?.(`cli: round ${r + 1}/${rounds}`);
    }
    const bareMs = median(times[0]!);
    return {
      rounds,
      bareMs: round(bareMs, 1),
      rows: commands.slice(1).map(([command], i) => {
        const ms = median(times[i + 1]!);
        return { command, medianMs: round(ms, 1), ratio: round(ms / bareMs) };
      }),
    };
  } finally {
    cleanup();
  }
}
