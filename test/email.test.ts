/**
 * The e-mail channel against a real SMTP server (smtp-server), messages read back with
 * mailparser: grouping into one message, text + HTML with every API string escaped,
 * 550 dead-lettered at once with the server's words, 451 retried, a burst of 200 events
 * for 50 sites as one message per site.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { App } from '../src/main.js';
import { testClock, type TestClock } from './clock.js';
import { siteEvent } from './events-fixture.js';
import { startWorld, type World, rows } from './harness.js';
import { startSmtp, type SmtpReceiver, type SmtpReply } from './smtp.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

async function setup(opts: { answer?: (n: number) => SmtpReply | null; route?: Record<string, unknown>; clock?: TestClock; starttls?: boolean } = {}): Promise<{ w: World; app: App; smtp: SmtpReceiver; clock: TestClock }> {
  const smtp = await startSmtp({ answer: opts.answer, starttls: opts.starttls });
  const w = await startWorld();
  cleanups.push(() => w.close(), () => smtp.close());
  const clock = opts.clock ?? testClock();
  const app = await w.app(
    {
      channels: [{ name: 'oncall', type: 'email', to: ['ops@example.net'], from: 'hostwatch@example.net', smtp: { host: '127.0.0.1', port: smtp.port }, timeout: '5s' }],
      routes: [{ channels: ['oncall'], group_wait: '0s', ...opts.route }],
      delivery: { retry_schedule: ['5s', '5m', '30m'] },
    },
    { now: clock.now },
  );
  return { w, app, smtp, clock };
}

describe('the e-mail channel', () => {
  it('sends an event as one message with a text and an HTML part, the summary as subject, and every API-supplied string HTML-escaped', async () => {
    const { app, smtp } = await setup();
    const evil = siteEvent('x', 7, {
      summary: 'New review: <script>alert("pwned")</script> & <b>bold</b>',
      domain: 'evil"><img src=x onerror=alert(1)>.example',
      severity: 'critical',
    });
    expect(await app.notifier.publish(evil)).toBe(true);
    expect(await app.worker.drain(5_000)).toBe(0);

    expect(smtp.messages).toHaveLength(1);
    const mail = smtp.messages[0]!;
    expect(mail.subject).toBe('[hostwatch] CRITICAL: New review: <script>alert("pwned")</script> & <b>bold</b>');
    expect(mail.from?.text).toBe('hostwatch@example.net');
    expect(mail.headers.get('x-hostwatch-event-ids')).toBe(evil.id);
    expect(mail.text).toContain('New review: <script>alert("pwned")</script> & <b>bold</b>');
    const html = String(mail.html);
    expect(html).toContain('New review: &lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;');
    expect(html).toContain('evil&quot;&gt;&lt;img src=x onerror=alert(1)&gt;.example');
    expect(html).not.toContain('<script>');
    expect(html).not.toContain('<img');
    expect(html).not.toContain('<b>bold');
  });

  it('delivers through a relay on this machine that offers STARTTLS with a self-signed certificate, as a stock Postfix does', async () => {
    const { app, smtp } = await setup({ starttls: true });
    expect(await app.notifier.publish(siteEvent('local-tls', 3))).toBe(true);
    expect(await app.worker.drain(5_000)).toBe(0);
    expect(smtp.messages).toHaveLength(1);
    expect(smtp.messages[0]!.headers.get('x-hostwatch-event-ids')).toBe(siteEvent('local-tls', 3).id);
  });

  it('sends neither the password nor the message to a server that offers no STARTTLS when smtp.require_tls is on (the default for a login to another machine), and says why', async () => {
    const smtp = await startSmtp({ login: { user: 'hostwatch', pass: 'smtp-pass-0123' } });
    const w = await startWorld();
    cleanups.push(() => w.close(), () => smtp.close());
    const app = await w.app({
      channels: [{ name: 'oncall', type: 'email', to: ['ops@example.net'], from: 'hostwatch@example.net', smtp: { host: '127.0.0.1', port: smtp.port, user: 'hostwatch', pass: 'smtp-pass-0123', require_tls: true }, timeout: '5s' }],
      routes: [{ channels: ['oncall'], group_wait: '0s' }],
    });
    await app.notifier.publish(siteEvent('tls', 1));
    await app.worker.deliverDue();
    expect(smtp.logins).toEqual([]);
    expect(smtp.attempts).toBe(0);
    const [row] = rows<{ state: string; last_error: string }>(w, 'SELECT state, last_error FROM outbox');
    expect(row).toEqual({
      state: 'pending',
      last_error:
        'SMTP connection not encrypted (STARTTLS failed: 500 Error: command not recognized); smtp.require_tls keeps the password and the message from going in clear text (set it to false for a server without TLS)',
    });
  });

  it('dead-letters a message the server answers 550 at once, with the server\'s reason, and never tries it again', async () => {
    const { w, app, smtp, clock } = await setup({ answer: () => ({ code: 550, message: '5.1.1 <ops@example.net>: mailbox unavailable' }) });
    await app.notifier.publish(siteEvent('a', 1));
    await app.worker.deliverDue();
    expect(smtp.attempts).toBe(1);
    const [row] = rows<{ state: string; attempts: number; last_error: string }>(w, 'SELECT state, attempts, last_error FROM outbox');
    expect(row).toMatchObject({ state: 'dead', attempts: 1 });
    expect(row!.last_error).toMatch(/^permanent failure: SMTP 550 5\.1\.1 <ops@example\.net>: mailbox unavailable/);
    const [attempt] = rows<{ outcome: string; status_code: number }>(w, 'SELECT outcome, status_code FROM delivery_attempts');
    expect(attempt).toEqual({ outcome: 'dead', status_code: 550 });
    clock.advance(3_600_000);
    await app.worker.deliverDue();
    expect(smtp.attempts).toBe(1);
    expect(smtp.messages).toHaveLength(0);
  });

  it('retries a message the server answers 451 and delivers it when the server accepts', async () => {
    const { w, app, smtp, clock } = await setup({ answer: (n) => (n === 1 ? { code: 451, message: '4.7.1 greylisted, try again later' } : null) });
    const e = siteEvent('b', 2);
    await app.notifier.publish(e);
    await app.worker.deliverDue();
    expect(rows<{ state: string; last_error: string }>(w, 'SELECT state, last_error FROM outbox')).toEqual([
      { state: 'pending', last_error: 'SMTP 451 4.7.1 greylisted, try again later' },
    ]);
    // Not before the retry is due (5 s, with jitter at most +20%).
    clock.advance(3_000);
    await app.worker.deliverDue();
    expect(smtp.attempts).toBe(1);
    clock.advance(3_000);
    await app.worker.deliverDue();
    expect(smtp.attempts).toBe(2);
    expect(smtp.messages).toHaveLength(1);
    expect(smtp.messages[0]!.headers.get('x-hostwatch-event-ids')).toBe(e.id);
    expect(rows<{ state: string; attempts: number }>(w, 'SELECT state, attempts FROM outbox')).toEqual([{ state: 'delivered', attempts: 2 }]);
  });

  it('turns a burst of 200 events for 50 sites into one message per site after group_wait, and holds the next ones for group_interval', async () => {
    const { w, app, smtp, clock } = await setup({ route: { group_by: ['site_id'], group_wait: '30s', group_interval: '5m' } });
    const names = ['backup.failed', 'cron.run_failed', 'job.failed', 'dns.record_changed'];
    for (let site = 1; site <= 50; site++) {
      for (const [i, name] of names.entries()) {
        await app.notifier.publish(siteEvent(`${site}-${i}`, site, { name }));
        clock.advance(10); // they arrive over two seconds, from many polls
      }
    }
    expect(rows<{ n: number }>(w, 'SELECT count(*) AS n FROM events')[0]!.n).toBe(200);
    await app.worker.deliverDue();
    expect(smtp.messages).toHaveLength(0); // group_wait: still collecting

    clock.advance(30_000);
    await app.worker.deliverDue();
    expect(smtp.messages).toHaveLength(50);
    const bySite = new Map<string, string[]>();
    for (const m of smtp.messages) {
      const ids = String(m.headers.get('x-hostwatch-event-ids')).split(' ');
      expect(ids).toHaveLength(4);
      const domains = new Set([...String(m.text).matchAll(/site(\d+)\.example\.com/g)].map((x) => x[1]!));
      expect(domains.size).toBe(1);
      bySite.set([...domains][0]!, ids);
      expect(m.subject).toMatch(/^\[hostwatch\] WARNING: 4 events on site\d+\.example\.com: /);
    }
    expect(bySite.size).toBe(50);
    expect(rows<{ state: string; n: number }>(w, 'SELECT state, count(*) AS n FROM outbox GROUP BY state')).toEqual([{ state: 'delivered', n: 200 }]);

    // A new event for site 1 soon after: it waits for group_interval from the last message.
    await app.notifier.publish(siteEvent('late', 1));
    clock.advance(60_000);
    await app.worker.deliverDue();
    expect(smtp.messages).toHaveLength(50);
    clock.advance(4 * 60_000);
    await app.worker.deliverDue();
    expect(smtp.messages).toHaveLength(51);
    expect(String(smtp.messages[50]!.headers.get('x-hostwatch-event-ids')).split(' ')).toHaveLength(1);
  });

  it('sends the digest of info events at the configured local time, as one message', async () => {
    const smtp = await startSmtp();
    const w = await startWorld();
    cleanups.push(() => w.close(), () => smtp.close());
    const clock = testClock('2026-11-21T05:00:00Z'); // 06:00 in Paris
    const app = await w.app(
      {
        channels: [
          { name: 'oncall', type: 'email', to: ['ops@example.net'], from: 'hostwatch@example.net', smtp: { host: '127.0.0.1', port: smtp.port }, digest: 'daily at 08:00 Europe/Paris' },
        ],
        routes: [{ channels: ['oncall'], group_wait: '0s' }],
      },
      { now: clock.now },
    );
    await app.notifier.publish(siteEvent('i1', 1, { severity: 'info', name: 'report.created' }));
    await app.notifier.publish(siteEvent('i2', 2, { severity: 'info', name: 'report.created' }));
    await app.notifier.publish(siteEvent('w1', 3, { severity: 'warning' }));
    await app.worker.deliverDue();
    expect(smtp.messages).toHaveLength(1); // the warning, not the digest
    clock.advance(2 * 3_600_000 - 60_000); // 07:59 Paris
    await app.worker.deliverDue();
    expect(smtp.messages).toHaveLength(1);
    clock.advance(60_000); // 08:00 Paris = 07:00Z
    await app.worker.deliverDue();
    expect(smtp.messages).toHaveLength(2);
    expect(String(smtp.messages[1]!.headers.get('x-hostwatch-event-ids')).split(' ')).toHaveLength(2);
  });
});
