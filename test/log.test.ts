import { describe, expect, it } from 'vitest';
import { createLogger, secretScrubber } from '../src/log.js';
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

  it('leaves text without secrets alone', () => {
    const scrub = secretScrubber(['abcd-secret']);
    expect(scrub('nothing to hide: abcd-secre')).toBe('nothing to hide: abcd-secre');
    expect(secretScrubber([])('x')).toBe('x');
  });
});
