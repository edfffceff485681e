/** A Slack incoming-webhook endpoint on loopback: answers "ok" unless `reply` says otherwise. */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SlackPost {
  body: string;
  json: { text: string; blocks: Array<{ type: string; text?: { type: string; text: string }; elements?: Array<{ text: string }> }> };
}
export type SlackReply = { status: number; body?: string; headers?: Record<string, string> } | 'hold';

export interface FakeSlack {
  url: string;
  posts: SlackPost[];
  close(): Promise<void>;
}

/** Start the endpoint; `reply(n)` answers the n-th post (1-based). */
export async function fakeSlack(reply: (n: number) => SlackReply = () => ({ status: 200, body: 'ok' })): Promise<FakeSlack> {
  const posts: SlackPost[] = [];
  const held: ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      posts.push({ body, json: JSON.parse(body) as SlackPost['json'] });
      const r = reply(posts.length);
      if (r === 'hold') return void held.push(res);
      res.writeHead(r.status, { 'content-type': 'text/plain', ...r.headers });
      res.end(r.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/services/T000/B000/secret-token-abc123`,
    posts,
    close: () =>
      new Promise<void>((resolve) => {
        for (const r of held) r.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Every mrkdwn text of a message: the fallback, the sections and the context lines. */
export function slackTexts(p: SlackPost): string[] {
  return [p.json.text, ...p.json.blocks.flatMap((b) => [b.text?.text ?? '', ...(b.elements ?? []).map((e) => e.text)])].filter(Boolean);
}
