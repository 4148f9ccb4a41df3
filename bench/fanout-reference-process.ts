// The references of `make bench-fanout` in a process of their own (bench/fanout-reference.ts,
// startReferenceProcess): opened and run on the requests of the benchmark, over IPC; stopped by it.
import { openReferences, type ReferenceAnswer, type ReferenceRequest, type References } from './fanout-reference.ts';

let references: References | null = null;
const answer = (message: ReferenceAnswer) => process.send!(message);

// The benchmark went without stopping us (it was killed): exit, whatever is still open.
process.on('disconnect', () => process.exit(0));

process.on('message', async (request: ReferenceRequest) => {
  try {
    if ('open' in request) {
      references = await openReferences(request.open);
      answer({ opened: true });
    } else {
      if (!references) throw new Error('not opened');
      answer({ rate: await references[request.run].run() });
    }
  } catch (error) {
    answer({ failed: (error as Error).stack ?? String(error) });
  }
});
