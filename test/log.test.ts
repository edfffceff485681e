import { describe, expect, it } from 'vitest';
import { replyScrubber } from '../src/api/scrub.js';
import { createLogger, secretScrubber } from '../src/log.js';
import { secretForms } from '../src/secret-forms.js';
import { LogCollector } from './harness.js';

describe('the logger', () => {
  it('removes every known secret from every line, wherever it appears', async () => {
    const key = 'hc_live_9f8e7d6c5b4a';
    const secret = 'whsec_c2VjcmV0LXZhbHVlLWhlcmU=';
    const out = new LogCollector();
    const log = createLogger({ level: 'info', pretty: false, scrub: secretScrubber([key, secret]), destination: out });
    log.info(`calling the API with ${key}`);
    log.warn({ err: new Error(`signature with ${secret} failed`), url: `https://x.example/?k=${key}` }, 'oops');
    log.info({ authorization: `Bearer ${key}`, nested: { secret: 'plain-but-named-secret' } }, 'headers');
    await new Promise((r) => setTimeout(r, 10));
    expect(out.lines).toHaveLength(3);
    expect(out.text).not.toContain(key);
    expect(out.text).not.toContain(secret);
    expect(out.text).not.toContain('plain-but-named-secret');
    expect(out.text.match(/\[REDACTED\]/g)!.length).toBeGreaterThanOrEqual(5);
  });

  it('removes a secret a server repeats encoded: SMTP AUTH PLAIN and LOGIN, HTTP Basic, base64url and percent-encoding', () => {
    const pass = 'smtp-pass+/hunter2?';
    const scrub = secretScrubber([pass]);
    const b64 = (s: string): string => Buffer.from(s).toString('base64');
    const echoes = [
      `535 5.7.8 rejected: AUTH PLAIN ${b64(`\0hostwatch\0${pass}`)}`,
      `535 AUTH PLAIN ${b64(`\0hw\0${pass}`)}`, // the password starts at another place in a group of three bytes
      `535 AUTH PLAIN ${b64(`\0hw2\0${pass}`)}`, // and at the third
      `334 UGFzc3dvcmQ6 ${b64(pass)}`, // AUTH LOGIN sends the password alone
      `401 Authorization: Basic ${b64(`hostwatch:${pass}`)}`,
      `token=${Buffer.from(`x${pass}`).toString('base64url')}`,
      `GET /hook?pass=${encodeURIComponent(pass)}`,
    ];
    for (const echo of echoes) {
      const out = scrub(echo);
      expect(out, echo).toContain('[REDACTED]');
      // No six characters in a row of any encoding of the secret stay (at most the one or two
      // at each end that share bits with its neighbours).
      for (const form of secretForms([pass]).slice(1)) for (let i = 0; i + 6 <= form.length; i++) expect(out, echo).not.toContain(form.slice(i, i + 6));
    }
    // What every scrubber looks for: the secret and its percent-encoding first, then its base64 pieces.
    expect(secretForms([pass]).slice(0, 2)).toEqual([pass, encodeURIComponent(pass)]);
    // A short secret's pieces inside a longer text would match ordinary words: it is looked for
    // encoded only where it ends the text, with its padding (a password in AUTH PLAIN or Basic).
    expect(secretForms(['abcd'])).toEqual(['abcd', 'YWJjZA==', 'FiY2Q=']);
    const short = secretScrubber(['s3cr3t']);
    for (const user of ['ab', 'abc', 'abcd']) {
      const line = `AUTH PLAIN ${b64(`\0${user}\0s3cr3t`)}`;
      expect(short(line), line).toMatch(/^AUTH PLAIN [A-Za-z0-9+/]{4,8}\[REDACTED\]$/);
    }
  });

  it('removes a secret with a quote or a backslash from a log line, where JSON escapes them, and from an error that quotes it as JSON', async () => {
    const pass = 'Sm"tp\\Pass-Secret-987654';
    const out = new LogCollector();
    const log = createLogger({ level: 'info', pretty: false, scrub: secretScrubber([pass]), destination: out });
    log.info(`login with ${pass} failed`);
    log.warn({ err: new Error(`454 auth failed: json=${JSON.stringify(pass)}`) }, 'smtp');
    await new Promise((r) => setTimeout(r, 10));
    expect(out.lines).toHaveLength(2);
    expect(out.text).not.toContain(JSON.stringify(pass).slice(1, -1));
    expect(out.text).not.toContain('Pass-Secret-987654');
    // The first message; the error's message and its stack.
    expect(out.text.match(/\[REDACTED\]/g)).toHaveLength(3);
    // An error text stored as it is (not in JSON): the server's JSON quoting of it.
    expect(secretScrubber([pass])(`454 json=${JSON.stringify(pass)}`)).toBe('454 json="[REDACTED]"');
  });

  it('pretty (the demo): API text in a message or an error cannot forge a log line or send a terminal escape', async () => {
    const out = new LogCollector();
    const log = createLogger({ level: 'info', pretty: true, scrub: (t) => t, destination: out });
    const forged = 'boom\r\n[21:00:00.000] INFO (hostwatch): all is well\u001b[2J';
    log.warn(`poll failed: ${forged}`);
    log.warn({ error: forged }, 'poll failed');
    await new Promise((r) => setTimeout(r, 50));
    expect(out.text).not.toMatch(/[\u0000-\u0009\u000b-\u001f]/);
    expect(out.text.split('\n').filter((l) => l.includes('all is well'))).toHaveLength(2);
    expect(out.text.split('\n').filter((l) => /^\[[\d:.]+\] INFO/.test(l))).toEqual([]);
  });

  it('removes a secret percent-encoded with lower-case or mixed hex digits (%2b, %2F), and matches only the hex digits in any case', () => {
    const key = 'Hc+Live/Key=9Z';
    const upper = encodeURIComponent(key);
    expect(upper).toBe('Hc%2BLive%2FKey%3D9Z');
    const lower = upper.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase());
    const mixed = 'Hc%2bLive%2FKey%3d9Z';
    const scrubbers = { log: secretScrubber([key]), reply: (t: string): string => replyScrubber([key])(JSON.stringify(t), t) as string };
    for (const [name, scrub] of Object.entries(scrubbers)) {
      for (const form of [upper, lower, mixed]) expect(scrub(`GET /hook?key=${form}&x=1`), `${name}: ${form}`).toBe('GET /hook?key=[REDACTED]&x=1');
      // The secret itself is case-sensitive: another key that differs only in case is not it.
      const other = lower.replace('Live', 'live');
      expect(scrub(`GET /hook?key=${other}`), name).toBe(`GET /hook?key=${other}`);
    }
  });

  it('leaves text without secrets alone', () => {
    const scrub = secretScrubber(['abcd-secret']);
    expect(scrub('nothing to hide: abcd-secre')).toBe('nothing to hide: abcd-secre');
    expect(secretScrubber([])('x')).toBe('x');
  });
});

describe('secrets of the delivery channels', () => {
  it('secretsOf names the SMTP password, the Slack URL and every secret of a webhook rotation', async () => {
    const { secretsOf } = await import('../src/log.js');
    const { configFrom, tempDir } = await import('./harness.js');
    const tmp = tempDir();
    try {
      const config = configFrom(
        [
          'api: { base_url: "https://panel.example.com", key: hc_live_key_1234 }',
          'channels:',
          '  - { name: hooks, type: webhook, url: "https://example.net/h", secret: [whsec_bmV3LXNlY3JldA==, whsec_b2xkLXNlY3JldA==] }',
          '  - { name: ops, type: slack, url: "https://hooks.slack.com/services/T1/B2/tok3n" }',
          '  - { name: mail, type: email, to: a@example.net, from: b@example.net, smtp: { host: smtp.example.net, user: u, pass: smtp-pa55 } }',
        ].join('\n'),
        {},
        tmp.dir,
      );
      expect(secretsOf(config)).toEqual(
        expect.arrayContaining([
          'whsec_bmV3LXNlY3JldA==',
          'bmV3LXNlY3JldA==',
          'whsec_b2xkLXNlY3JldA==',
          'b2xkLXNlY3JldA==',
          'https://hooks.slack.com/services/T1/B2/tok3n',
          '/services/T1/B2/tok3n',
          'smtp-pa55',
        ]),
      );
    } finally {
      tmp.cleanup();
    }
  });

  it('a Slack URL or SMTP password echoed back by a server, as written or base64-encoded, never reaches the logs, the database or an operator event', async () => {
    const { createServer } = await import('node:http');
    const BetterSqlite3 = (await import('better-sqlite3')).default;
    const { startWorld } = await import('./harness.js');
    const { startSmtp } = await import('./smtp.js');
    const { siteEvent } = await import('./events-fixture.js');
    const pass = 'smtp-pass-hunter2-secret';
    // The server repeats the password as sent, and the whole AUTH PLAIN line (base64).
    const plain = Buffer.from(`\0hostwatch\0${pass}`).toString('base64');
    const smtp = await startSmtp({ login: { user: 'hostwatch', pass: 'the-right-one' }, authError: (p) => `5.7.8 password ${p} is wrong: AUTH PLAIN ${Buffer.from(`\0hostwatch\0${p}`).toString('base64')}` });
    let slackUrl = '';
    const slack = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(500);
        res.end(`cannot post to ${slackUrl}`);
      });
    });
    await new Promise<void>((r) => slack.listen(0, '127.0.0.1', r));
    slackUrl = `http://127.0.0.1:${(slack.address() as { port: number }).port}/services/T9/B9/sl4ck-t0ken-secret`;
    const w = await startWorld();
    try {
      const app = await w.app({
        channels: [
          { name: 'ops', type: 'slack', url: slackUrl },
          { name: 'mail', type: 'email', to: 'ops@example.net', from: 'hw@example.net', smtp: { host: '127.0.0.1', port: smtp.port, user: 'hostwatch', pass } },
          { name: 'log', type: 'console' },
        ],
        routes: [{ channels: ['ops', 'mail', 'log'], group_wait: '0s' }],
      }, { consoleWrite: () => undefined });
      await app.notifier.publish(siteEvent('leak', 2));
      await app.worker.drain(1_500);
      await app.stop();
      expect(smtp.logins.map((l) => l.pass)).toContain(pass); // the server really saw it
      const db = new BetterSqlite3(w.dbPath, { readonly: true });
      let dump = '';
      try {
        for (const t of ['outbox', 'delivery_attempts', 'channel_state', 'events']) dump += JSON.stringify(db.prepare(`SELECT * FROM ${t}`).all());
      } finally {
        db.close();
      }
      expect(dump).toContain('[REDACTED]'); // the echoes were stored, scrubbed
      expect(dump).toContain('channel.disabled'); // the refused login disabled the e-mail channel
      for (const text of [dump, w.logs.text]) {
        expect(text).not.toContain(pass);
        expect(text).not.toContain(plain.slice(8, 36)); // the password's part of the AUTH PLAIN line
        expect(text).not.toContain(slackUrl);
        expect(text).not.toContain('sl4ck-t0ken-secret');
      }
    } finally {
      await w.close();
      await smtp.close();
      await new Promise<void>((r) => slack.close(() => r()));
    }
  });
});
