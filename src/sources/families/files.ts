/**
 * File integrity watch (opt-in): `files/stat` of each configured path of every watched
 * site. A path that does not exist is a record with `exists: false`, so a file appearing
 * or disappearing is a change like any other.
 */
import type { SourceDef } from '../types.js';
import { MINUTE } from './time.js';

/** One record per configured path: `size`, `modified`, `mode`, `type`. */
export const filesSource: SourceDef = {
  name: 'files',
  scope: 'files:read',
  per: 'site',
  path: '/sites/{site_id}/files/stat',
  paged: false,
  key: 'path',
  each: { option: 'paths', param: 'path' },
  volatile: [],
  defaultEnabled: false,
  defaultEveryMs: 15 * MINUTE,
};
