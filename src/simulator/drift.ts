/**
 * Seeded drift: what tick() changes on its own so the demo and long runs have something
 * to report. Each tick touches at most MAX_SITES_PER_TICK sites (recoveries included), so
 * a 10,000-site world costs the same per tick as a 5-site one.
 */
import type { Random } from './random.js';
import type { World } from './world.js';

export const MAX_SITES_PER_TICK = 3;

type Action = 'offline' | 'slow' | 'disk' | 'backup' | 'integrity';

const ACTION_WEIGHTS: Readonly<Record<Action, number>> = { offline: 2, slow: 2, disk: 3, backup: 2, integrity: 1 };

/** Something drift broke and will put right on a later tick, unless a test changed it meanwhile. */
type Mark =
  | { kind: 'online'; due: number; status: string }
  | { kind: 'integrity'; due: number; problems: number }
  | { kind: 'disk'; due: number; froze: boolean };

/** The drift policy; owns its pending recoveries, draws from the world's seeded stream. */
export class Drift {
  /** Insertion-ordered, so recovery order is deterministic. Small: one per disturbed site. */
  private readonly marks = new Map<number, Mark>();

  constructor(
    private readonly world: World,
    private readonly rng: Random,
  ) {}

  /** Drops any pending recovery of a removed site. */
  forget(siteId: number): void {
    this.marks.delete(siteId);
  }

  /** One drift step: due recoveries first, then one or two new disturbances within the site budget. */
  step(tick: number): void {
    const touched = new Set<number>();
    for (const [siteId, mark] of this.marks) {
      if (touched.size >= MAX_SITES_PER_TICK) break;
      if (mark.due > tick) continue;
      this.marks.delete(siteId);
      this.recover(siteId, mark);
      touched.add(siteId);
    }
    const wanted = Math.min(this.rng.int(1, 2), MAX_SITES_PER_TICK - touched.size);
    for (let i = 0; i < wanted; i++) {
      const siteId = this.pickQuietSite(touched);
      if (siteId === undefined) continue;
      touched.add(siteId);
      this.disturb(siteId, tick);
    }
  }

  private pickQuietSite(touched: Set<number>): number | undefined {
    const sites = this.world.sites;
    if (sites.length === 0) return undefined;
    // A few random tries instead of a scan: O(1) however big the world is.
    for (let attempt = 0; attempt < 4; attempt++) {
      const id = this.rng.pick(sites).id;
      if (!touched.has(id) && !this.marks.has(id)) return id;
    }
    return undefined;
  }

  private disturb(siteId: number, tick: number): void {
    const health = this.world.getHealth(siteId);
    const usage = this.world.getUsage(siteId);
    if (!health || !usage) return;
    let action = this.rng.weighted(ACTION_WEIGHTS);
    if ((action === 'offline' || action === 'slow') && health.online.status !== 'online') action = 'disk';
    switch (action) {
      case 'offline':
      case 'slow': {
        this.world.setHealth(siteId, { status: action });
        this.marks.set(siteId, { kind: 'online', due: tick + this.rng.int(1, action === 'offline' ? 4 : 3), status: action });
        return;
      }
      case 'integrity': {
        const problems = this.rng.int(1, 3);
        this.world.setHealth(siteId, { problems });
        this.marks.set(siteId, { kind: 'integrity', due: tick + this.rng.int(2, 5), problems });
        return;
      }
      case 'disk': {
        const { used_mib, limit_mib } = usage.disk;
        const grown = used_mib + Math.round(limit_mib * (0.03 + this.rng.float() * 0.09));
        const over = grown > limit_mib;
        // A site over its disk limit is sometimes frozen, as the panel does for usage limits.
        const froze = over && !usage.frozen && this.rng.chance(0.5);
        this.world.setUsage(siteId, froze ? { diskUsedMib: grown, frozen: true } : { diskUsedMib: grown });
        if (grown >= limit_mib * 0.9) {
          this.marks.set(siteId, { kind: 'disk', due: tick + this.rng.int(2, 6), froze });
        }
        return;
      }
      case 'backup': {
        this.world.startBackup(siteId, this.rng.chance(0.5) ? 'Automatic' : 'Manual');
        return;
      }
    }
  }

  private recover(siteId: number, mark: Mark): void {
    const health = this.world.getHealth(siteId);
    const usage = this.world.getUsage(siteId);
    if (!health || !usage) return;
    switch (mark.kind) {
      case 'online':
        // Leave it alone if a test (or the control API) changed it meanwhile.
        if (health.online.status === mark.status) this.world.setHealth(siteId, { status: 'online' });
        return;
      case 'integrity':
        if (health.integrity.problems === mark.problems) this.world.setHealth(siteId, { problems: 0 });
        return;
      case 'disk': {
        const cleaned = Math.round(usage.disk.limit_mib * (0.3 + this.rng.float() * 0.3));
        this.world.setUsage(siteId, mark.froze ? { diskUsedMib: cleaned, frozen: false } : { diskUsedMib: cleaned });
        return;
      }
    }
  }
}
