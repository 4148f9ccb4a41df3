// The lane gate (worker/lane-gate.ts): normal jobs wait at their start while high-priority work
// runs in the process, at most a bounded time; campaign work waits likewise while any send's job runs.
import { LaneGate } from '../src/worker/lane-gate.ts';

/** Resolves with how long `promise` took to settle, in ms. */
async function timed(promise: Promise<unknown>): Promise<number> {
  const started = performance.now();
  await promise;
  return performance.now() - started;
}

/** High-priority work that runs until `end` is called. */
function highWork(gate: LaneGate): { end: () => void; done: Promise<void> } {
  let end!: () => void;
  const done = gate.high(() => new Promise<void>((resolve) => (end = resolve)));
  return { end, done };
}

test('a normal turn comes at once when no high-priority work runs', async () => {
  const gate = new LaneGate(1000);
  expect(await timed(gate.turn())).toBeLessThan(50);
});

test('a normal turn waits until the high-priority work has ended, the last of several', async () => {
  const gate = new LaneGate(5000);
  const first = highWork(gate);
  const second = highWork(gate);
  let turned = false;
  const turn = gate.turn().then(() => (turned = true));
  first.end();
  await first.done;
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(turned).toBe(false);
  second.end();
  await second.done;
  await turn;
  expect(turned).toBe(true);
  // Once it has all ended, the next turn comes at once again.
  expect(await timed(gate.turn())).toBeLessThan(50);
});

test('a normal turn waits no longer than the bound, however long the high-priority work runs', async () => {
  const gate = new LaneGate(200);
  const work = highWork(gate);
  const waited = await timed(gate.turn());
  expect(waited).toBeGreaterThanOrEqual(190);
  expect(waited).toBeLessThan(1000);
  work.end();
  await work.done;
});

test("high-priority work's result and error are its own, and an error still opens the gate", async () => {
  const gate = new LaneGate(5000);
  expect(await gate.high(async () => 'pushed')).toBe('pushed');
  await expect(gate.high(async () => Promise.reject(new Error('provider down')))).rejects.toThrow('provider down');
  expect(await timed(gate.turn())).toBeLessThan(50);
});

describe('the campaign lane', () => {
  /** A send's job (either priority) that runs until `end` is called. */
  function sendWork(gate: LaneGate): { end: () => void; done: Promise<void> } {
    let end!: () => void;
    const done = gate.transactional(() => new Promise<void>((resolve) => (end = resolve)));
    return { end, done };
  }

  test("a campaign turn waits while a send's job runs here, and comes once the last has ended", async () => {
    const gate = new LaneGate(5000, 5000);
    expect(await timed(gate.campaignTurn())).toBeLessThan(50);
    const first = sendWork(gate);
    const second = sendWork(gate);
    let turned = false;
    const turn = gate.campaignTurn().then(() => (turned = true));
    first.end();
    await first.done;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(turned).toBe(false);
    second.end();
    await second.done;
    await turn;
    expect(turned).toBe(true);
  });

  test('a campaign turn waits no longer than its bound: a broadcast is slowed by sends, never stopped', async () => {
    const gate = new LaneGate(5000, 200);
    const work = sendWork(gate);
    const waited = await timed(gate.campaignTurn());
    expect(waited).toBeGreaterThanOrEqual(190);
    expect(waited).toBeLessThan(1000);
    work.end();
    await work.done;
  });

  test("a send's job does not wait for campaign work, and an error still opens the campaign's turn", async () => {
    const gate = new LaneGate(5000, 5000);
    expect(await timed(gate.turn())).toBeLessThan(50);
    await expect(gate.transactional(async () => Promise.reject(new Error('provider down')))).rejects.toThrow('provider down');
    expect(await timed(gate.campaignTurn())).toBeLessThan(50);
  });
});
