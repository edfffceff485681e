/**
 * Conditional requests against a server that speaks Last-Modified (the simulator speaks
 * ETag, tested in polling.test.ts), against one that sends no validators (a digest of the
 * reply stands in), and paged lists: validators only for one-page lists.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiClient } from '../src/api/client.js';
import { Fetcher } from '../src/sources/fetch.js';
import { entityOf, sourceByName } from '../src/sources/registry.js';

let server: Server | undefined;
let client: ApiClient | undefined;
afterEach(async () => {
  await client?.close();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

const STAMP = 'Sat, 21 Nov 2026 10:00:00 GMT';

/** A server whose answers the test scripts; records the request headers. */
async function serve(answer: (url: string, headers: IncomingHttpHeaders) => { status: number; body?: unknown; headers?: Record<string, string> }): Promise<{ url: string; seen: IncomingHttpHeaders[] }> {
  const seen: IncomingHttpHeaders[] = [];
  server = createServer((req, res) => {
    seen.push(req.headers);
    const a = answer(req.url ?? '', req.headers);
    res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
    res.end(a.body === undefined ? '' : JSON.stringify(a.body));
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, seen };
}

function fetcherFor(url: string): Fetcher {
  client = new ApiClient({ baseUrl: url, key: 'k', timeoutMs: 2000, maxRequestsPerSecond: 1000, maxConcurrency: 2, retries: 0, maxPages: 10 });
  return new Fetcher(client);
}

describe('conditional requests', () => {
  it('send If-Modified-Since from a Last-Modified, and read a 304 as "not modified"', async () => {
    const { url, seen } = await serve((_, h) =>
      h['if-modified-since'] === STAMP ? { status: 304 } : { status: 200, body: { data: { pointed: true } }, headers: { 'last-modified': STAMP } },
    );
    const f = fetcherFor(url);
    const ref = entityOf(sourceByName('nameservers')!, { id: 3, domain: 'x' });
    expect(await f.fetch(ref)).toEqual({ kind: 'data', data: { pointed: true } });
    expect(await f.fetch(ref)).toEqual({ kind: 'not_modified' });
    expect(seen[0]!['if-modified-since']).toBeUndefined();
    expect(seen[1]!['if-modified-since']).toBe(STAMP);
    f.forget(ref);
    expect((await f.fetch(ref)).kind).toBe('data');
  });

  it('keep no validators for a list longer than one page (a 304 on page 1 says nothing about page 2)', async () => {
    const { url, seen } = await serve((u) =>
      u.includes('cursor=p2')
        ? { status: 200, body: { data: [{ id: 2 }], next_cursor: null, has_more: false }, headers: { etag: 'W/"b"' } }
        : { status: 200, body: { data: [{ id: 1 }], next_cursor: 'p2', has_more: true }, headers: { etag: 'W/"a"' } },
    );
    const f = fetcherFor(url);
    const ref = entityOf(sourceByName('local_keywords')!, null);
    expect(await f.fetch(ref)).toEqual({ kind: 'data', data: [{ id: 1 }, { id: 2 }] });
    expect(await f.fetch(ref)).toEqual({ kind: 'data', data: [{ id: 1 }, { id: 2 }] });
    expect(seen.map((h) => h['if-none-match'])).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('read a reply with the same bytes as the last one as "not modified" when the server sends no validators, without parsing it', async () => {
    let data: unknown = { pointed: true };
    const { url, seen } = await serve(() => ({ status: 200, body: { data } }));
    const f = fetcherFor(url);
    const ref = entityOf(sourceByName('nameservers')!, { id: 3, domain: 'x' });
    expect(await f.fetch(ref)).toEqual({ kind: 'data', data: { pointed: true } });
    const parse = vi.spyOn(JSON, 'parse');
    try {
      expect(await f.fetch(ref)).toEqual({ kind: 'not_modified' });
      expect(parse.mock.calls.filter(([text]) => typeof text === 'string' && text.includes('pointed'))).toEqual([]);
    } finally {
      parse.mockRestore();
    }
    // One byte moved: read and parsed; then that reply is the one compared with.
    data = { pointed: false };
    expect(await f.fetch(ref)).toEqual({ kind: 'data', data: { pointed: false } });
    expect(await f.fetch(ref)).toEqual({ kind: 'not_modified' });
    // Nothing was asked of the server: it was sent no validator it did not give.
    expect(seen.map((h) => [h['if-none-match'], h['if-modified-since']])).toEqual(Array(4).fill([undefined, undefined]));
    // Forgotten (a commit that failed): the same reply is data again.
    f.forget(ref);
    expect(await f.fetch(ref)).toEqual({ kind: 'data', data: { pointed: false } });
  });

  it('read a list of more than one page in full every time from a server without validators', async () => {
    const { url } = await serve((u) =>
      u.includes('cursor=p2') ? { status: 200, body: { data: [{ id: 2 }], next_cursor: null, has_more: false } } : { status: 200, body: { data: [{ id: 1 }], next_cursor: 'p2', has_more: true } },
    );
    const f = fetcherFor(url);
    const ref = entityOf(sourceByName('local_keywords')!, null);
    expect(await f.fetch(ref)).toEqual({ kind: 'data', data: [{ id: 1 }, { id: 2 }] });
    expect(await f.fetch(ref)).toEqual({ kind: 'data', data: [{ id: 1 }, { id: 2 }] });
  });

  it('answer a one-page list with the same bytes as "not modified", and the plain client.get and list never', async () => {
    const { url } = await serve(() => ({ status: 200, body: { data: [{ id: 1 }] } }));
    const f = fetcherFor(url);
    const ref = entityOf(sourceByName('local_keywords')!, null);
    expect(await f.fetch(ref)).toEqual({ kind: 'data', data: [{ id: 1 }] });
    expect(await f.fetch(ref)).toEqual({ kind: 'not_modified' });
    // The unconditional reads have no last reply to compare with: always the data.
    expect(await client!.get('/x')).toEqual([{ id: 1 }]);
    expect(await client!.get('/x')).toEqual([{ id: 1 }]);
    expect(await client!.list('/x')).toEqual([{ id: 1 }]);
    expect(await client!.list('/x')).toEqual([{ id: 1 }]);
  });

  it('treat a 409 of a source with notApplicable as "not applicable", and of another source as a failure', async () => {
    const { url } = await serve(() => ({ status: 409, body: { error: { code: 'conflict', message: 'not on the CDN' } } }));
    const f = fetcherFor(url);
    expect(await f.fetch(entityOf(sourceByName('security')!, { id: 1, domain: 'x' }))).toEqual({ kind: 'not_applicable', code: 'conflict' });
    await expect(f.fetch(entityOf(sourceByName('dns')!, { id: 1, domain: 'x' }))).rejects.toMatchObject({ code: 'conflict' });
  });
});
