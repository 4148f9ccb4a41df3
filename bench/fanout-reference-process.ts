// The references of `make bench-fanout` in a process of their own (bench/fanout-reference.ts,
// startReferenceProcess): opened, run and closed on the requests of the benchmark, over IPC.
import { openReferences, type ReferenceAnswer, type ReferenceRequest, type References } from './fanout-reference.ts';

let references: References | null = null;
const answer = (message: ReferenceAnswer) => process.send!(message);

// The benchmark has gone (it closed us, or it was killed): exit, whatever is still open.
process.on('disconnect', () => process.exit(0));

process.on('message', async (request: ReferenceRequest) => {
  try {
    if ('open' in request) {
      references = await openReferences(request.open);
      answer({ opened: true });
    } else if ('run' in request) {
      if (!references) throw new Error('not opened');
      answer({ rate: await references[request.run].run() });
    } else {
      await references?.close();
      answer({ closed: true });
      process.disconnect();
    }
  } catch (error) {
    answer({ failed: (error as Error).stack ?? String(error) });
  }
});
