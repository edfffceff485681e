/**
 * Imported first by cli.ts, for its side effect. ES modules run every import of a module
 * before its body, and in the order written: the daemon's heap flags (heap.ts) set in
 * cli.ts's body would come after main.ts and its libraries had loaded, and their loading
 * alone had grown V8's young generation to its full 2 × 16 MB (seen at 10,000 sites: 137 MB
 * RSS after createApp instead of 97), which the flags then keep. Set here, they apply from
 * the first module on.
 */
import { preferSmallHeap } from './heap.js';

/** The commands that run the daemon (and its heap) rather than print something and exit. */
export const DAEMON_COMMANDS = ['run', 'poll', 'demo'];

if (DAEMON_COMMANDS.includes(process.argv[2] ?? '')) preferSmallHeap();
