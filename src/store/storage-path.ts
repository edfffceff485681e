import { accessSync, constants, mkdirSync, statSync, type Stats } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Why the SQLite file at `path` could not be opened or created, or null when it can.
 * Looks only (stat and access): `hostwatch check` runs it without creating anything, and
 * `run` runs it before creating the folder, so both name the same path and reason rather
 * than SQLite's "unable to open database file".
 */
export function storagePathProblem(path: string): string | null {
  if (path === ':memory:') return null;
  const file = statOf(path);
  if (file === 'error') return `cannot read ${path}`;
  if (file !== null) {
    if (file.isDirectory()) return `${path} is a folder; storage.path names the database file inside it, like ${path.replace(/\/+$/, '')}/hostwatch.db`;
    if (!file.isFile()) return `${path} is not a regular file`;
    if (!canWrite(path)) return `${path} is not writable by this user`;
    // SQLite writes its -wal and -shm files beside the database.
    if (!canWrite(dirname(path))) return `the folder ${dirname(path)} is not writable by this user (SQLite keeps ${path}-wal beside the database)`;
    return null;
  }
  // The file does not exist yet: its nearest existing ancestor must be a writable folder.
  let dir = dirname(path);
  for (;;) {
    const st = statOf(dir);
    if (st === 'error') return `cannot read ${dir}`;
    if (st !== null) {
      if (!st.isDirectory()) return `cannot create ${dirname(path)}: ${dir} is a file, not a folder`;
      if (!canWrite(dir)) return `cannot create ${path}: the folder ${dir} is not writable by this user`;
      return null;
    }
    const up = dirname(dir);
    if (up === dir) return `cannot create ${path}: no existing folder above it`;
    dir = up;
  }
}

/**
 * Create the folder of the database file and the missing folders above it, one at a time,
 * or say why one cannot be made (null once they exist). Not `mkdirSync(dir, { recursive:
 * true })`: where a folder cannot be made although its parent exists (under /proc, say, as
 * root, whom access() lets write anywhere), Node's recursive mkdir tries again forever.
 */
export function makeFolders(path: string): string | null {
  if (path === ':memory:') return null;
  const missing: string[] = [];
  for (let dir = dirname(path); statOf(dir) === null; dir = dirname(dir)) {
    missing.unshift(dir);
    if (dirname(dir) === dir) break;
  }
  for (const dir of missing) {
    try {
      mkdirSync(dir);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST') return `cannot create the folder ${dir} (${code ?? String(e)})`;
    }
  }
  return null;
}

/** Does the database file exist (a read-only command needs it; only `run` creates it)? */
export function storageExists(path: string): boolean {
  return path === ':memory:' || statOf(path) !== null;
}

function statOf(path: string): Stats | null | 'error' {
  try {
    return statSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    // ENOTDIR: a file sits where a folder of the path should be; the walk up names it.
    return code === 'ENOENT' || code === 'ENOTDIR' ? null : 'error';
  }
}

function canWrite(path: string): boolean {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}
