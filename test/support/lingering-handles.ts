// When jest ends a test worker that did not exit by itself ("A worker process has failed to exit
// gracefully"), it sends SIGTERM: this writes what still held the worker's event loop, and which
// test file the worker ran last, to reports/lingering-handles.log, which make test prints. (Written
// to a file: what a worker writes to its stderr then can be lost, as jest stops reading it.)
// No line at all beside the warning means the worker was busy, not waiting on a handle.
// The test environment's `process` is a copy whose listeners the real process never calls: the
// real one is the global of the main context.
import { appendFileSync, mkdirSync } from 'node:fs';
import vm from 'node:vm';

const report = new URL('../../reports/lingering-handles.log', import.meta.url);

const real = new vm.Script('process').runInThisContext() as NodeJS.Process & { heraldLastTestFile?: string };

const describeHandle = (handle: unknown): string => {
  const name = (handle as object)?.constructor?.name ?? typeof handle;
  if (name === 'Socket') {
    const socket = handle as import('node:net').Socket;
    return `Socket(local ${socket.localPort ?? '-'}, remote ${socket.remoteAddress ?? '-'}:${socket.remotePort ?? '-'})`;
  }
  if (name === 'Server' || name === 'Http2SecureServer') return `${name}(${JSON.stringify((handle as import('node:net').Server).address())})`;
  if (name === 'ChildProcess') return `ChildProcess(${(handle as import('node:child_process').ChildProcess).spawnargs.join(' ').slice(0, 120)})`;
  return name;
};

beforeAll(() => {
  const first = real.heraldLastTestFile === undefined;
  real.heraldLastTestFile = expect.getState().testPath;
  if (!first) return;
  real.once('SIGTERM', () => {
    // _getActiveHandles is undocumented, but it is the only way to name the objects behind the
    // resources getActiveResourcesInfo counts; this runs only on the way out of a leaking worker.
    const handles = (real as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles().map(describeHandle);
    mkdirSync(new URL('.', report), { recursive: true });
    appendFileSync(
      report,
      `test worker ${real.pid} ended by jest after ${real.heraldLastTestFile}: still active ${JSON.stringify(real.getActiveResourcesInfo())}; handles ${handles.join(', ')}\n`,
    );
    real.exit(143);
  });
});
