/**
 * Shared benchmark plumbing: the simulator in a child process, temporary databases, and the
 * small statistics the reports use. Light on purpose (no daemon modules): the bare-client
 * baseline process imports it too, and its RSS must not include what it does not use.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

/** A Standard Webhooks secret for the bench receiver (`whsec_` + base64 of 32 bytes). */
export const BENCH_SECRET = `whsec_${Buffer.from('hostwatch-bench-secret-32-bytes!').toString('base64')}`;
export const BENCH_KEY = 'sim-key';

/** Rate limit used by the benchmarks: high enough that the limiter never waits (see docs/benchmarks.md). */
export const UNLIMITED_RPS = 1_000_000;

/** Path of a compiled file next to this one (dist/bench/...). */
export function benchFile(name: string): string {
  return fileURLToPath(new URL(name, import.meta.url));
}

/** A child `node` process running a compiled bench script, stdin kept open as a lifeline. */
export function spawnNode(script: string, args: string[], nodeFlags: string[] = []): ChildProcess {
  return spawn(process.execPath, [...nodeFlags, benchFile(script), ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
}

/** Resolves with the first stdout line of a child parsed as JSON. */
export function firstJsonLine<T>(child: ChildProcess, what: string, timeoutMs = 60_000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => reject(new Error(`${what}: no output after ${timeoutMs} ms`)), timeoutMs);
    const onExit = (code: number | null): void => {
      clearTimeout(timer);
      reject(new Error(`${what}: exited (${code}) before reporting`));
    };
    child.once('exit', onExit);
    rl.once('line', (line) => {
      clearTimeout(timer);
      child.off('exit', onExit);
      rl.close();
      try {
        resolve(JSON.parse(line) as T);
      } catch {
        reject(new Error(`${what}: not JSON: ${line.slice(0, 200)}`));
      }
    });
  });
}

/** Every JSON line a child prints until it exits (the last one is usually the result). */
export function jsonLines<T>(child: ChildProcess, onLine?: (v: T) => void): Promise<T[]> {
  return new Promise<T[]>((resolve, reject) => {
    const out: T[] = [];
    const rl = createInterface({ input: child.stdout! });
    rl.on('line', (line) => {
      if (line.trim() === '') return;
      try {
        const v = JSON.parse(line) as T;
        out.push(v);
        onLine?.(v);
      } catch {
        process.stderr.write(`${line}\n`);
      }
    });
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`child exited with ${code}`))));
  });
}

export function waitExit(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
}

/** The simulator in its own process, driven through /_sim. */
export interface SimChild {
  url: string;
  pid: number;
  /** POST/DELETE/GET a control endpoint (path after /_sim); throws on a non-2xx answer. */
  control(method: string, path: string, body?: unknown): Promise<unknown>;
  tick(count?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startSimChild(opts: { sites: number; seed?: number; log?: number; etags?: boolean }): Promise<SimChild> {
  const child = spawnNode('sim-child.js', ['--sites', String(opts.sites), '--seed', String(opts.seed ?? 7), '--log', String(opts.log ?? 0), '--etags', opts.etags === false ? '0' : '1']);
  const { url, pid } = await firstJsonLine<{ url: string; pid: number }>(child, 'simulator child');
  const control = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${url}/_sim${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`simulator control ${method} ${path}: ${res.status} ${text.slice(0, 200)}`);
    return (JSON.parse(text) as { data: unknown }).data;
  };
  return {
    url,
    pid,
    control,
    tick: async (count = 1) => {
      await control('POST', '/tick', { count });
    },
    close: async () => {
      child.kill('SIGTERM');
      await waitExit(child);
    },
  };
}

/** A temporary folder for a bench database; removed by cleanup(). */
export function tempDir(prefix = 'hostwatch-bench-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Discards log lines (the daemon still formats them, as in production). */
export function nullStream(): Writable {
  return new Writable({
    write(_chunk, _enc, cb) {
      cb();
    },
  });
}

/** Full GC when node runs with --expose-gc (npm run bench does); twice, for weak refs and finalizers. */
export function gcNow(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) {
    gc();
    gc();
  }
}

export const MB = 1024 * 1024;

export function median(xs: readonly number[]): number {
  return percentile(xs, 50);
}

/** Nearest-rank percentile (p in 0..100). */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))]!;
}

/** Least-squares slope of ys over xs. */
export function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  if (n < 2) return 0;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

export function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** The machine a result was produced on. */
export function machine(): { cpus: number; cpuModel: string; node: string; platform: string; totalMemMB: number; loadAvg1m: number } {
  const c = cpus();
  return {
    cpus: c.length,
    cpuModel: c[0]?.model.trim() ?? 'unknown',
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    totalMemMB: Math.round(totalmem() / MB),
    loadAvg1m: round(loadavg()[0] ?? 0, 2),
  };
}

/** A plain-text table: the first `leftColumns` columns left-aligned, the rest right-aligned. */
export function table(header: string[], rows: string[][], leftColumns = 1): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i < leftColumns ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** Run `fn` over `items` with at most `limit` at once (the scheduler's bounded pool, in miniature). */
export async function pool<T>(items: readonly T[], limit: number, fn: (t: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}

/**
 * Relay an accepted connection to `port` on `host`, both ways, as a direct connection
 * would behave (either side gone: the other goes too). Both sockets are kept in `sockets`
 * while open, so the relay's owner can cut them. Returns the upstream socket.
 */
export function relayConnection(down: Socket, host: string, port: number, sockets: Set<Socket>): Socket {
  const up = connect(port, host);
  for (const sock of [down, up]) {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => {
      down.destroy();
      up.destroy();
    });
  }
  down.pipe(up);
  up.pipe(down);
  return up;
}
