/**
 * A site's files (spec 1 "Files"), the per-site `files` family: a flat map of path → entry
 * with contents inline. Drift occasionally edits a watched file (`.htaccess`, config) so an
 * integrity watch has something to see.
 */
import type { Family } from '../resources.js';
import { bool, fail, invalid, ok, queryBool, reqStr, type Ctx } from '../routes.js';
import { DAY_MS, isoAgo, isoUtc } from './common.js';

const MAX_LIST = 5000;
const MAX_READ = 5 * 1024 * 1024;
const MAX_WRITE = 25 * 1024 * 1024;
/** Platform-managed folders: never written through the API. */
const MANAGED = ['.platform'];

export interface FileNode {
  type: 'folder' | 'file' | 'link';
  modified: string;
  mode: string;
  /** Base64 of the bytes, for files. */
  content?: string;
  /** Where a link points (never followed). */
  target?: string;
}

export interface FilesState {
  /** Keyed by the path relative to the site folder, without a leading slash ('' is the site folder). */
  entries: Record<string, FileNode>;
}

/** The File Manager rule: the site is installed, its plan active, not suspended (S22: site states `installing`, `expired`, `suspended`). */
const files = (c: Ctx): FilesState => {
  const state = c.world.getSite(c.siteId)?.state;
  if (state === 'installing' || state === 'expired' || state === 'suspended') fail('conflict', `files are not available while the site is ${state}`);
  return c.res.site<FilesState>('files', c.siteId);
};

/** '' for the site folder; no leading or trailing slash; `..` refused. */
function norm(raw: string | null | undefined): string {
  const p = (raw ?? '').replace(/^\/+|\/+$/g, '');
  if (p.split('/').includes('..')) invalid('path', 'must stay inside the site folder', raw);
  return p;
}

function parentOf(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? '' : path.slice(0, i);
}

function sizeOf(n: FileNode): number | null {
  return n.type === 'folder' ? null : n.type === 'link' ? (n.target ?? '').length : Buffer.from(n.content ?? '', 'base64').length;
}

/** Spec FileEntry. */
export function entryOf(path: string, n: FileNode): Record<string, unknown> {
  return { name: path === '' ? '' : path.slice(path.lastIndexOf('/') + 1), type: n.type, size: sizeOf(n), modified: n.modified, mode: n.mode, path };
}

function nodeAt(s: FilesState, path: string): FileNode {
  return s.entries[path] ?? fail('not_found', `no file or folder ${path || '/'}`);
}

/** 403 for writes into managed folders or through links. */
function checkWritable(s: FilesState, path: string): void {
  if (MANAGED.some((m) => path === m || path.startsWith(`${m}/`))) fail('forbidden', `${path} is in a platform-managed folder`);
  const parts = path.split('/');
  for (let i = 1; i <= parts.length; i++) {
    if (s.entries[parts.slice(0, i).join('/')]?.type === 'link') fail('forbidden', `refusing to write through the symbolic link ${parts.slice(0, i).join('/')}`);
  }
}

function mkdirs(s: FilesState, path: string, at: string): void {
  const parts = path.split('/');
  for (let i = 1; i <= parts.length; i++) {
    const p = parts.slice(0, i).join('/');
    const n = s.entries[p];
    if (!n) s.entries[p] = { type: 'folder', modified: at, mode: '755' };
    else if (n.type !== 'folder') fail('conflict', `${p} is a ${n.type}, not a folder`);
  }
}

function children(s: FilesState, folder: string): string[] {
  const prefix = folder === '' ? '' : `${folder}/`;
  return Object.keys(s.entries).filter((p) => p !== '' && p.startsWith(prefix) && !p.slice(prefix.length).includes('/'));
}

function text(s: string): string {
  return Buffer.from(s).toString('base64');
}

export const filesFamily: Family<FilesState> = {
  name: 'files',
  per: 'site',
  seed: ({ rng, epoch, site }) => {
    const at = (days: number): string => isoAgo(epoch, days * DAY_MS + rng.int(0, 86_399) * 1000);
    const domain = site?.domain ?? 'example.com';
    return {
      entries: {
        '': { type: 'folder', modified: at(1), mode: '755' },
        '.htaccess': { type: 'file', modified: at(rng.int(5, 200)), mode: '644', content: text('RewriteEngine On\nRewriteRule ^index\\.php$ - [L]\n') },
        'config.php': { type: 'file', modified: at(rng.int(5, 400)), mode: '640', content: text(`<?php\ndefine('SITE_URL', 'https://${domain}');\ndefine('DB_NAME', 'site');\n`) },
        'index.php': { type: 'file', modified: at(rng.int(5, 400)), mode: '644', content: text('<?php require __DIR__ . "/app.php";\n') },
        public: { type: 'folder', modified: at(2), mode: '755' },
        'public/robots.txt': { type: 'file', modified: at(30), mode: '644', content: text('User-agent: *\nDisallow:\n') },
        logs: { type: 'folder', modified: at(0), mode: '750' },
        '.platform': { type: 'folder', modified: at(30), mode: '755' },
        current: { type: 'link', modified: at(30), mode: '777', target: 'public' },
      },
    };
  },
  actions: {
    /** Someone edits a file (args.path, default .htaccess; args.content, or args.size: padded/cut to that many bytes; args.mode). */
    touch: (s, args, a) => {
      const path = typeof args.path === 'string' ? norm(args.path) : '.htaccess';
      const node = s.entries[path] ?? (s.entries[path] = { type: 'file', modified: a.iso(), mode: '644', content: '' });
      if (typeof args.content === 'string') node.content = text(args.content);
      else if (typeof args.size === 'number') {
        const bytes = Buffer.alloc(args.size, 0x23);
        Buffer.from(node.content ?? '', 'base64').copy(bytes, 0, 0, args.size);
        node.content = bytes.toString('base64');
      } else node.content = text(`${Buffer.from(node.content ?? '', 'base64').toString()}# edited ${a.iso()}\n`);
      if (typeof args.mode === 'string') node.mode = args.mode;
      node.modified = a.iso();
      a.record('changed', { path });
      return entryOf(path, node);
    },
  },
  drift: (s, a) => {
    if (a.rng.chance(0.3)) filesFamily.actions!.touch!(s, { path: a.rng.pick(['.htaccess', 'config.php', 'index.php']) }, a);
  },
  driftWeight: 1,
  routes: [
    {
      method: 'GET',
      path: '/sites/{site_id}/files',
      scope: 'files:read',
      handler: (c) => {
        const s = files(c);
        const path = norm(c.query.get('path'));
        const n = nodeAt(s, path);
        if (n.type !== 'folder') fail('conflict', `${path} is not a folder`);
        const kids = children(s, path).sort((x, y) => Number(s.entries[y]?.type === 'folder') - Number(s.entries[x]?.type === 'folder') || x.localeCompare(y));
        return ok({ path, items: kids.slice(0, MAX_LIST).map((p) => entryOf(p, s.entries[p] as FileNode)), truncated: kids.length > MAX_LIST });
      },
    },
    {
      method: 'GET',
      path: '/sites/{site_id}/files/stat',
      scope: 'files:read',
      handler: (c) => {
        if (c.query.get('path') === null) invalid('path', 'is required');
        const path = norm(c.query.get('path'));
        return ok(entryOf(path, nodeAt(files(c), path)));
      },
    },
    {
      method: 'GET',
      path: '/sites/{site_id}/files/content',
      scope: 'files:read',
      handler: (c) => {
        const path = norm(c.query.get('path'));
        if (path === '') invalid('path', 'is required');
        const encoding = c.query.get('encoding') ?? 'base64';
        if (!['base64', 'text', 'raw'].includes(encoding)) invalid('encoding', 'must be one of base64, text, raw', encoding);
        const n = nodeAt(files(c), path);
        if (n.type !== 'file') fail('conflict', `${path} is a ${n.type}, not a file`);
        const bytes = Buffer.from(n.content ?? '', 'base64');
        if (bytes.length > MAX_READ) fail('too_large', 'files over 5 MB cannot be read', { limit_bytes: MAX_READ });
        const type = path.endsWith('.txt') ? 'text/plain' : path.endsWith('.php') ? 'application/x-php' : 'application/octet-stream';
        if (encoding === 'raw') return { status: 200, body: bytes, headers: { 'content-type': type } };
        return ok({ path, size: bytes.length, modified: n.modified, content_type: type, content: encoding === 'text' ? bytes.toString('utf8') : bytes.toString('base64'), encoding });
      },
    },
    {
      method: 'PUT',
      path: '/sites/{site_id}/files/content',
      scope: 'files:write',
      handler: (c) => {
        const s = files(c);
        const path = norm(c.query.get('path'));
        if (path === '') invalid('path', 'is required');
        const overwrite = queryBool(c, 'overwrite', false);
        const makeDirs = queryBool(c, 'mkdirs', true);
        let bytes: Buffer;
        if (c.body.raw) bytes = c.body.contentType?.startsWith('multipart/') ? multipartFile(c.body.raw) : c.body.raw;
        else if (typeof c.body.content === 'string') bytes = Buffer.from(c.body.content, 'utf8');
        else if (typeof c.body.content_base64 === 'string') bytes = Buffer.from(c.body.content_base64, 'base64');
        else return fail('validation_failed', 'give content, content_base64, raw bytes or a multipart file', { field: 'content' });
        if (bytes.length > MAX_WRITE) fail('too_large', 'files over 25 MB cannot be written', { limit_bytes: MAX_WRITE });
        checkWritable(s, path);
        const existing = s.entries[path];
        if (existing && existing.type !== 'file') fail('conflict', `${path} is a ${existing.type}`);
        if (existing && !overwrite) fail('conflict', `${path} exists; pass overwrite=true`);
        const parent = parentOf(path);
        if (!s.entries[parent]) {
          if (!makeDirs) fail('not_found', `no folder ${parent}`);
          mkdirs(s, parent, isoUtc(c.world.time()));
        }
        const node: FileNode = { type: 'file', modified: isoUtc(c.world.time()), mode: existing?.mode ?? '644', content: bytes.toString('base64') };
        s.entries[path] = node;
        c.world.note('files.written', c.siteId, { path, bytes: bytes.length });
        return ok({ ...entryOf(path, node), written: bytes.length }, 201);
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/files/folders',
      scope: 'files:write',
      handler: (c) => {
        const s = files(c);
        const path = norm(reqStr(c, 'path'));
        checkWritable(s, path);
        mkdirs(s, path, isoUtc(c.world.time()));
        return ok(entryOf(path, s.entries[path] as FileNode), 201);
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/files/move',
      scope: 'files:write',
      handler: (c) => {
        const s = files(c);
        const from = norm(reqStr(c, 'path'));
        const to = norm(reqStr(c, 'to'));
        const overwrite = bool(c, 'overwrite') ?? false;
        const node = nodeAt(s, from);
        if (from === '') fail('conflict', 'the site folder cannot be moved');
        if (s.entries[to] && !overwrite) fail('conflict', `${to} exists; pass overwrite: true`);
        if (!s.entries[parentOf(to)]) fail('not_found', `no folder ${parentOf(to)}`);
        for (const p of Object.keys(s.entries)) {
          if (p === from || p.startsWith(`${from}/`)) {
            s.entries[to + p.slice(from.length)] = s.entries[p] as FileNode;
            delete s.entries[p];
          }
        }
        c.world.note('files.moved', c.siteId, { from, to });
        return ok({ ...entryOf(to, node), moved_from: from });
      },
    },
    {
      method: 'DELETE',
      path: '/sites/{site_id}/files',
      scope: 'files:write',
      handler: (c) => {
        const s = files(c);
        const path = norm(c.query.get('path'));
        if (path === '') invalid('path', 'is required and cannot be the site folder');
        const recursive = queryBool(c, 'recursive', false);
        const node = nodeAt(s, path);
        const inside = Object.keys(s.entries).filter((p) => p.startsWith(`${path}/`));
        if (node.type === 'folder' && inside.length > 0 && !recursive) fail('conflict', `${path} is not empty; pass recursive=true`);
        for (const p of inside) delete s.entries[p];
        delete s.entries[path];
        c.world.note('files.deleted', c.siteId, { path, entries_removed: inside.length + 1 });
        return ok({ path, deleted: true, entries_removed: inside.length + 1 });
      },
    },
  ],
};

/** The bytes of the `file` field of a multipart body (enough of RFC 7578 for one file part). */
function multipartFile(raw: Buffer): Buffer {
  const textBody = raw.toString('latin1');
  const m = /name="file"[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n([\s\S]*?)\r\n--/.exec(textBody);
  if (!m) fail('validation_failed', 'the multipart body has no file field', { field: 'file' });
  return Buffer.from(m[1] as string, 'latin1');
}
