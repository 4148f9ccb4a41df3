// A worker process killed with SIGKILL in the middle of sending webhooks: nothing is lost, and what
// is sent again is the same events (same ids), within the at-least-once promise.
import { verifyWebhook } from '../../sdk/src/index.ts';
import { addWebhookEndpoint } from '../../src/domain/webhooks.ts';
import { requestsPerRound } from '../../src/worker/webhooks.ts';
import { ios, startPipeline, type Pipeline } from '../support/fanout.ts';
import { startHerald, type HeraldProcess } from '../support/processes.ts';
import { startReceiver, waitFor, type Receiver } from '../support/receiver.ts';

describe('webhook-crash', () => {
  let pipeline: Pipeline;
  let receiver: Receiver;
  let workerEnv: Record<string, string>;
  const workers: HeraldProcess[] = [];

  beforeAll(async () => {
    pipeline = await startPipeline({ workers: false });
    receiver = await startReceiver();
    workerEnv = {
      ...pipeline.workerEnvironment(),
      // The receiver is on this machine.
      HERALD_WEBHOOK_ALLOW_PRIVATE: 'true',
      HERALD_WEBHOOK_RETRY_BASE_SECONDS: '0.2',
    };
  }, 300_000);
  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.stop('SIGKILL')));
    await pipeline.close();
    await receiver.close();
  });

  const startWorker = async () => {
    const worker = await startHerald(['work'], workerEnv, (line) => line.includes('workers started'));
    workers.push(worker);
    return worker;
  };

  test('a worker killed mid-delivery: another sends the rest, every event arrives, repeats carry the same event id', async () => {
    pipeline.apns.setRules([{ prefix: 'whcrash-', reason: 'Unregistered' }]);
    const app = await pipeline.newApplication();
    const { secret } = await addWebhookEndpoint(
      pipeline.harness.orm.em.fork(),
      { applicationId: app.id, url: `${receiver.url}/crash`, events: ['delivery.failed', 'notification.completed'] },
      pipeline.credentialsKey,
      { allowPrivate: true },
    );
    // A slow receiver: the kill lands while requests are in flight.
    receiver.answer('/crash', { delayMs: 150 });
    const users = Array.from({ length: 60 }, (_, i) => `crash-user-${i}`);
    await app.registerAll(users.map((user, i) => [`crash-phone-${i}`, ios(`whcrash-${i}`, user)]));

    const first = await startWorker();
    const id = await app.send({ recipients: { user_ids: users }, notification: { title: 'Crash test' } });
    await waitFor(() => receiver.at('/crash').length, (count) => count >= 15, 30_000);
    first.child.kill('SIGKILL');
    await first.stop();
    const atKill = receiver.at('/crash').length;
    const [{ pending }] = await pipeline.harness.orm.em
      .fork()
      .execute<{ pending: number }[]>(`select count(*)::int as pending from webhook_deliveries where application_id = ? and state = 'pending'`, [app.id]);
    expect(pending).toBeGreaterThan(0);

    await startWorker();
    const stored = await pipeline.harness.orm.em
      .fork()
      .execute<{ id: string; type: string }[]>('select id, type from webhook_events where application_id = ?', [app.id]);
    // 60 delivery.failed and one notification.completed, each received at least once.
    const expected = new Set(stored.map((row) => row.id));
    const received = await waitFor(
      async () => Promise.all(receiver.at('/crash').map(async (got) => (await verifyWebhook(got.body, got.headers['herald-signature'] as string, secret)).id)),
      (ids) => [...expected].every((eventId) => ids.includes(eventId)),
      60_000,
    );
    expect(receiver.at('/crash').length).toBeGreaterThan(atKill);
    expect(stored.filter((row) => row.type === 'delivery.failed')).toHaveLength(60);
    expect(stored.filter((row) => row.type === 'notification.completed')).toHaveLength(1);
    expect((await app.notification(id)).status).toBe('failed');
    // Nothing but the stored events, and repeats only of the round in flight at the kill (at most 10 per job).
    expect(received.every((eventId) => expected.has(eventId))).toBe(true);
    expect(received.length - expected.size).toBeLessThanOrEqual(2 * requestsPerRound);
    const states = await waitFor(
      () => pipeline.harness.orm.em.fork().execute<{ state: string; count: number }[]>(
        `select d.state, count(*)::int as count from webhook_deliveries d join webhook_events e on e.id = d.event_id where e.application_id = ? group by d.state`,
        [app.id],
      ),
      (rows) => rows.length === 1 && rows[0].state === 'succeeded',
    );
    expect(states).toEqual([{ state: 'succeeded', count: 61 }]);
  }, 120_000);
});
