/**
 * Imported first by the daemon's bench processes (daemon-child.ts, reply-child.ts), for its
 * side effect: the heap flags of `hostwatch run` and `poll` (src/heap.ts), set before
 * main.ts and its libraries load, as src/command-heap.ts sets them for the CLI. What is
 * measured is what runs.
 */
import { preferSmallHeap } from '../src/heap.js';

preferSmallHeap();
