// Pushes per second through the real providers against the simulators, all in this one process
// (client and simulator share the CPU). Not a jest test: `node test/providers/throughput.ts [count] [runs]`.
import { createApnsProvider } from '../../src/providers/apns.ts';
import { createFcmProvider } from '../../src/providers/fcm.ts';
import { resetFcmEndpoint } from '../../src/providers/fcm-endpoint.ts';
import type { Push, PushProvider } from '../../src/providers/provider.ts';
import { apnsSimulator, fcmSimulator, makePush, silentLogger } from '../support/simulators.ts';

const count = Number(process.argv[2] ?? 5000);
const runs = Number(process.argv[3] ?? 5);

function pushes(prefix: string): Push[] {
  const expiresAt = new Date(Date.now() + 3600_000);
  return Array.from({ length: count }, (_, index) =>
    makePush(
      `${prefix}-${index}`,
      { notification: { title: 'Order shipped', body: 'Your order is on its way' }, data: { order_id: index }, options: { priority: 'high', ttl: 3600 } },
      expiresAt,
    ),
  );
}

async function measure(name: string, provider: PushProvider, sessions: () => number): Promise<void> {
  await provider.send(pushes(`${name}-warmup`).slice(0, 10));
  const rates: number[] = [];
  for (let run = 0; run < runs; run++) {
    const batch = pushes(`${name}-${run}`);
    const started = performance.now();
    const outcomes = await provider.send(batch);
    const seconds = (performance.now() - started) / 1000;
    const accepted = outcomes.filter((outcome) => outcome.kind === 'accepted').length;
    if (accepted !== count) throw new Error(`${name}: ${accepted} of ${count} accepted`);
    rates.push(count / seconds);
  }
  rates.sort((a, b) => a - b);
  const median = rates[Math.floor(rates.length / 2)];
  console.log(
    `${name}: ${count} pushes × ${runs} runs, median ${Math.round(median)}/s (min ${Math.round(rates[0])}, max ${Math.round(rates.at(-1)!)}), ` +
      `${sessions()} connection(s) opened in all`,
  );
}

const apns = await apnsSimulator({ record: false });
const apnsProvider = createApnsProvider(apns.credentials, { apns: apns.sim.url, ca: apns.sim.ca }, silentLogger);
await measure('APNs', apnsProvider, () => apns.sim.counters.sessions);
await apnsProvider.close();
await apns.sim.stop();

const fcm = await fcmSimulator({ record: false });
const fcmProvider = createFcmProvider(fcm.credentials, { fcm: fcm.sim.url, ca: fcm.sim.ca }, silentLogger);
await measure('FCM', fcmProvider, () => fcm.sim.counters.sessions);
await fcmProvider.close();
await fcm.sim.stop();
resetFcmEndpoint();
