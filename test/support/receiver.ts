// A webhook receiver on this machine (node:http): it records every request and answers as a test
// tells it, per path: a status, a delay, a redirect, or a sequence of those, one per request.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Received = { path: string; headers: IncomingHttpHeaders; body: string; at: number };
export type Answer = { status?: number; delayMs?: number; location?: string; body?: string };

export type Receiver = {
  /** http://127.0.0.1:<port> */
  url: string;
  received: Received[];
  /** The requests to this path, in arrival order. */
  at(path: string): Received[];
  /** How this path answers: one answer each time, or a sequence (the last one repeats). */
  answer(path: string, ...answers: Answer[]): void;
  close(): Promise<void>;
};

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const answers = new Map<string, { sequence: Answer[]; served: number }>();
  const delayed = new Set<NodeJS.Timeout>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      const plan = answers.get(path);
      const answer: Answer = plan ? plan.sequence[Math.min(plan.served++, plan.sequence.length - 1)] : {};
      const reply = () => {
        if (res.destroyed) return;
        res.writeHead(answer.status ?? 200, { 'Content-Type': 'text/plain', ...(answer.location ? { Location: answer.location } : {}) });
        res.end(answer.body ?? 'ok');
      };
      if (!answer.delayMs) return reply();
      const timer = setTimeout(() => {
        delayed.delete(timer);
        reply();
      }, answer.delayMs);
      delayed.add(timer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    at: (path) => received.filter((request) => request.path === path),
    answer(path, ...sequence) {
      answers.set(path, { sequence, served: 0 });
    },
    close() {
      for (const timer of delayed) clearTimeout(timer);
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** Polls until `done` holds for what `probe` returns (or throws after `timeoutMs`). */
export async function waitFor<T>(probe: () => T | Promise<T>, done: (value: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out; last: ${JSON.stringify(value)?.slice(0, 2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
