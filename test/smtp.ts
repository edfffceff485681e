/**
 * A real SMTP server for e-mail tests (`smtp-server` on loopback), with messages read back
 * by `mailparser`. `answer` decides, per message, whether the server accepts it or answers
 * with an SMTP error (451, 550, ...) at DATA.
 */
import type { AddressInfo } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export interface SmtpReply {
  code: number;
  message: string;
}

export interface SmtpReceiver {
  port: number;
  /** Accepted messages, parsed. */
  messages: ParsedMail[];
  /** Every DATA attempt, accepted or not, in order. */
  attempts: number;
  /** Logins seen (user, pass). */
  logins: Array<{ user: string; pass: string }>;
  close(): Promise<void>;
}

/** Start an SMTP server on 127.0.0.1 (any free port); `answer(n)` for the n-th message (1-based): null accepts. */
export async function startSmtp(
  opts: {
    answer?: (n: number) => SmtpReply | null;
    login?: { user: string; pass: string };
    authError?: (pass: string) => string;
    /** Offer STARTTLS, with smtp-server's own certificate (self-signed, as a stock relay's). */
    starttls?: boolean;
  } = {},
): Promise<SmtpReceiver> {
  const messages: ParsedMail[] = [];
  const logins: Array<{ user: string; pass: string }> = [];
  const state = { attempts: 0 };
  const server = new SMTPServer({
    authOptional: opts.login === undefined,
    allowInsecureAuth: true,
    disabledCommands: opts.starttls ? [] : ['STARTTLS'],
    logger: false,
    onAuth(auth, _session, cb) {
      logins.push({ user: auth.username ?? '', pass: auth.password ?? '' });
      if (opts.login && (auth.username !== opts.login.user || auth.password !== opts.login.pass)) {
        const err = Object.assign(new Error(opts.authError?.(auth.password ?? '') ?? '5.7.8 Authentication credentials invalid'), { responseCode: 535 });
        return cb(err);
      }
      cb(null, { user: auth.username });
    },
    onData(stream, _session, cb) {
      const n = ++state.attempts;
      const reply = opts.answer?.(n) ?? null;
      simpleParser(stream).then(
        (mail) => {
          if (reply) return cb(Object.assign(new Error(reply.message), { responseCode: reply.code }));
          messages.push(mail);
          cb();
        },
        (e: Error) => cb(e),
      );
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    port,
    messages,
    get attempts() {
      return state.attempts;
    },
    logins,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
