// Herald as separate OS processes (crash and multi-process tests): started on the run's
// database, ready once their "API listening" log line names the port.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { databaseUrl } from './harness.ts';

export type HeraldProcess = { child: ChildProcess; port: number | null; logs: string[]; stop(signal?: NodeJS.Signals): Promise<void> };

export async function startHerald(
  args: string[],
  env: Record<string, string> = {},
  ready: (line: string) => boolean = (line) => line.includes('API listening'),
  /** The CLI's entry point: the TypeScript itself, or the compiled build's (build/cli/main.js). */
  main = 'src/cli/main.ts',
): Promise<HeraldProcess> {
  const child = spawn(process.execPath, [main, ...args], {
    env: {
      PATH: process.env.PATH,
      NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE,
      DATABASE_URL: env.DATABASE_URL ?? databaseUrl(),
      LOG_LEVEL: 'info',
      PORT: '0',
      HOST: '127.0.0.1',
      // Answers of spawned servers are checked against the document too.
      HERALD_VALIDATE_RESPONSES: 'true',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  let port: number | null = null;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    // A start this long is a hung one: on a busy two-core host a start has taken over 20 s.
    const timer = setTimeout(() => {
      child.kill('SIGKILL'); // never left running behind a failed test
      reject(new Error(`herald ${args.join(' ')} did not start:\n${logs.join('\n')}`));
    }, 60_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`herald ${args.join(' ')} exited with ${code}:\n${logs.join('\n')}`));
    });
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({ input: stream }).on('line', (line) => {
        logs.push(line);
        const listening = /"msg":"API listening"/.test(line) ? JSON.parse(line).address?.port : undefined;
        if (listening) port = listening;
        if (ready(line)) {
          clearTimeout(timer);
          resolve();
        }
      });
    }
  });
  return {
    child,
    get port() {
      return port;
    },
    logs,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}
