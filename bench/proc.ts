/**
 * CPU time of processes and of the machine, from Linux's /proc: what a multi-process part
 * (the cluster) needs to show whether its figure is CPU-bound. Elsewhere (no /proc) every
 * reading is null and the report says so.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks a second in /proc's times (USER_HZ: 100 on every Linux x64 kernel). */
const TICKS = 100;

/** One process's ppid, its own CPU seconds, and those of its children it has reaped (exited and waited for). */
interface Stat {
  ppid: number;
  own: number;
  reaped: number;
}

/** A process's /proc/<pid>/stat, or null when it is gone or there is no /proc. */
function statOf(pid: number): Stat | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ').map(Number);
    return { ppid: f[1]!, own: (f[11]! + f[12]!) / TICKS, reaped: (f[13]! + f[14]!) / TICKS };
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) a process has used so far; null when unreadable. */
export function cpuSeconds(pid: number): number | null {
  return statOf(pid)?.own ?? null;
}

/**
 * CPU seconds of a process and all its descendants (a PostgreSQL server: the postmaster, its
 * backends and its helpers), those that exited included: a parent that waited for an exited
 * child holds its time (cutime, cstime), so a backend closed in a window still counts.
 */
export function treeCpuSeconds(root: number): number | null {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return null;
  }
  const stats = new Map<number, Stat>();
  for (const n of names) {
    if (!/^\d+$/.test(n)) continue;
    const st = statOf(Number(n));
    if (st) stats.set(Number(n), st);
  }
  if (!stats.has(root)) return null;
  const children = new Map<number, number[]>();
  for (const [pid, { ppid }] of stats) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  let total = 0;
  const todo = [root];
  while (todo.length > 0) {
    const pid = todo.pop()!;
    const st = stats.get(pid);
    total += st ? st.own + st.reaped : 0;
    todo.push(...(children.get(pid) ?? []));
  }
  return total;
}

/** The machine's busy and total CPU seconds (every core, every process, ours and others'), or null. */
export function machineCpu(): { busy: number; total: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0) / TICKS;
    return { busy: total - (v[3]! + v[4]!) / TICKS, total };
  } catch {
    return null;
  }
}
