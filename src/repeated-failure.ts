import type { Logger } from 'pino';

/**
 * A failure that comes back at every turn of a timer while the store is down (a tick every
 * second, a liveness row every few seconds): said once at error (the message should say
 * "said once until …"), then at debug, and once at info when a turn works again. The
 * store's own failure is reported apart (/readyz, storage.failing).
 */
export class RepeatedFailure {
  private failing = false;

  constructor(
    private readonly log: Logger,
    private readonly failedMessage: string,
    private readonly recoveredMessage: string,
  ) {}

  failed(err: string): void {
    this.log[this.failing ? 'debug' : 'error']({ err }, this.failedMessage);
    this.failing = true;
  }

  worked(): void {
    if (this.failing) this.log.info(this.recoveredMessage);
    this.failing = false;
  }
}
