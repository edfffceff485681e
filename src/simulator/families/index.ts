/**
 * Every resource family the simulator serves (one module per family of spec endpoints).
 * The order is the route-matching order and the drift order; appending a family keeps
 * earlier families' seeded worlds unchanged.
 */
import type { Family } from '../resources.js';
import { aivisFamily } from './aivis.js';
import { archiveFamily } from './archive.js';
import { hourlyFamily } from './backups.js';
import { competitorsFamily } from './competitors.js';
import { cronFamily } from './cron.js';
import { dnsFamily } from './dns.js';
import { extradbFamily } from './extradb.js';
import { filesFamily } from './files.js';
import { footprintFamily } from './footprint.js';
import { localFamily } from './local.js';
import { mailFamily } from './mail.js';
import { rankFamily } from './rank.js';
import { reportsFamily } from './reports.js';
import { reputationFamily } from './reputation.js';
import { researchFamily } from './research.js';
import { botcheckFamily, securityFamily } from './security.js';
import { backlinksFamily, seoFamily } from './seo.js';
import { sitesFamily } from './sites.js';
import { updatesFamily } from './updates.js';

export const FAMILIES: readonly Family[] = [
  sitesFamily,
  hourlyFamily,
  dnsFamily,
  filesFamily,
  cronFamily,
  securityFamily,
  botcheckFamily,
  extradbFamily,
  mailFamily,
  updatesFamily,
  researchFamily,
  rankFamily,
  localFamily,
  reportsFamily,
  reputationFamily,
  footprintFamily,
  seoFamily,
  backlinksFamily,
  archiveFamily,
  competitorsFamily,
  aivisFamily,
];
