/**
 * File integrity watch (opt-in): `files/stat` of each configured path of every watched
 * site. A path that does not exist is a record with `exists: false`, so a file appearing
 * or disappearing is a change like any other.
 */
import { site } from './define.js';
import { MINUTE } from './time.js';

/** One record per configured path: `size`, `modified`, `mode`, `type`. */
export const filesSource = site('files', 'files:read', '/sites/{site_id}/files/stat', 15 * MINUTE, {
  key: 'path',
  each: { option: 'paths', param: 'path' },
  defaultEnabled: false,
});
