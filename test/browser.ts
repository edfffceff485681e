/**
 * The headless Chromium the browser tests drive. The system's Chromium when there is one
 * (Debian's package at /usr/bin/chromium, or `chromium` / `chromium-browser` on PATH);
 * otherwise the one `npm ci` brings in `@sparticuz/chromium`, so `npm ci && npm test`
 * passes on a fresh machine with nothing installed by hand.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

/** Flags for a system Chromium: headless, and able to run as root (CI runs as root). */
const SYSTEM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Launch headless Chromium (system or bundled), with extra flags if given. Not a skip when there is none: a failure. */
export async function launchBrowser(extraArgs: readonly string[] = []): Promise<Browser> {
  const system = systemChromium();
  if (system) return chromium.launch({ executablePath: system, args: [...SYSTEM_ARGS, ...extraArgs] });
  const bundled = (await import('@sparticuz/chromium')).default;
  // Its flags are made for AWS Lambda; `--single-process` (needed only under Lambda's
  // seccomp) makes closing a page end the whole browser, so it is left out, and so are the
  // flags that switch off the same-origin policy: the tests need a browser as users have it.
  const unsafe = new Set(['--single-process', '--disable-web-security', '--allow-running-insecure-content']);
  const args = [...bundled.args.filter((a) => !unsafe.has(a)), ...extraArgs];
  return chromium.launch({ executablePath: bundledChromium(), args });
}

/** The path of a Chromium installed on this machine, or null. */
export function systemChromium(): string | null {
  if (isExecutable('/usr/bin/chromium')) return '/usr/bin/chromium';
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    for (const name of ['chromium', 'chromium-browser']) {
      const file = join(dir, name);
      if (dir !== '' && isExecutable(file)) return file;
    }
  }
  return null;
}

/** The installed @sparticuz/chromium version (its package.json is not exported, so found from its entry). */
function bundledVersion(): string {
  let dir = dirname(createRequire(import.meta.url).resolve('@sparticuz/chromium'));
  while (!existsSync(join(dir, 'package.json')) || !dir.endsWith(join('@sparticuz', 'chromium'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('@sparticuz/chromium: package.json not found');
    dir = up;
  }
  return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The bundled Chromium, unpacked once per version into its own folder under the temp dir.
 * `@sparticuz/chromium` unpacks into `os.tmpdir()`; two test workers (or two checkouts)
 * unpacking into the same place at once could start a half-written binary, so each unpacks
 * in a private folder (a child process with its own TMPDIR) and renames it into place,
 * which is atomic: a loser of the race just uses the winner's copy.
 */
function bundledChromium(): string {
  const version = bundledVersion();
  const dir = join(tmpdir(), `hostwatch-chromium-${version}`);
  const binary = join(dir, 'chromium');
  if (existsSync(binary)) return binary;
  const staging = mkdtempSync(join(tmpdir(), 'hostwatch-chromium-unpack-'));
  const script = "const c = (await import('@sparticuz/chromium')).default; process.stdout.write(await c.executablePath());";
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: process.cwd(), env: { ...process.env, TMPDIR: staging }, encoding: 'utf8' });
  if (r.status !== 0 || r.stdout !== join(staging, 'chromium')) {
    rmSync(staging, { recursive: true, force: true });
    throw new Error(`could not unpack @sparticuz/chromium (exit ${r.status}): ${r.stderr || r.stdout}`);
  }
  try {
    renameSync(staging, dir);
  } catch {
    // Another worker renamed its copy into place first.
    rmSync(staging, { recursive: true, force: true });
  }
  return binary;
}
