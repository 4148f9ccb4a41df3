// A send to an audience, streamed (worker/broadcasts.ts): 25,000 installations, more than a walk's
// window holds, walked in batches by worker processes, one killed with SIGKILL mid-walk, a walk
// cancelled mid-way, and another application's installations never reached.
import { deliveryCounts, recountedStatistics } from '../support/deliveries.ts';
import { startPipeline, type Pipeline, type PipelineApplication } from '../support/fanout.ts';
import { startHerald, type HeraldProcess } from '../support/processes.ts';
import { waitFor } from '../support/receiver.ts';
import request from 'supertest';
import { countAudience } from '../../src/db/sql/audiences.ts';

describe('broadcast', () => {
  let pipeline: Pipeline;
  let workerEnv: Record<string, string>;
  const workers: HeraldProcess[] = [];
  let app: PipelineApplication;
  let other: PipelineApplication;

  /** The audience of the big broadcasts. */
  const audienceSize = 25_000;

  beforeAll(async () => {
    pipeline = await startPipeline({ workers: false });
    workerEnv = { ...pipeline.workerEnvironment(), HERALD_DELIVER_CHUNK_SIZE: '50' };
    app = await pipeline.newApplication();
    other = await pipeline.newApplication();
    await installations(app.id, 'bc', audienceSize);
    // Another application's installations, with the same tags: a walk reads its own application's only.
    await installations(other.id, 'other', 2_000);
  }, 300_000);
  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.stop('SIGKILL')));
    await pipeline.close();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.stop('SIGKILL')));
    pipeline.apns.setLatency(undefined);
    pipeline.fcm.setLatency(undefined);
  });

  /**
   * `count` installations written in one statement: half iOS, half Android, one in fifty with the
   * permission denied (skipped), one in a thousand sharing its device's identifier with another of
   * its platform seen more recently (skipped as a duplicate: one device, one push), one in ten
   * without a user.
   */
  async function installations(applicationId: string, prefix: string, count: number): Promise<void> {
    await pipeline.harness.orm.em.fork().execute(
      `insert into installations
         (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id, device,
          registered_at, last_seen_at, identifier_updated_at, permission_updated_at, tags)
       select gen_random_uuid(), ?, ? || '-' || n, case when n % 2 = 0 then 'ios' else 'android' end,
              ? || '-' || lpad((case when n % 1000 = 7 then n - 2 else n end)::text, 8, '0'), 'active',
              case when n % 50 = 0 then 'denied' else 'authorized' end,
              case when n % 10 = 0 then null else 'user-' || (n / 2) end, '{}'::jsonb,
              now(), now() - make_interval(secs => n), now(), now(), jsonb_build_object('plan', case when n % 4 = 0 then 'pro' else 'free' end)
         from generate_series(1, ?) n`,
      [applicationId, prefix, prefix, count],
    );
  }

  /** A send to an audience, through the API. */
  const broadcast = (to: PipelineApplication, audience: Record<string, unknown>, title: string): Promise<string> =>
    to.send({ recipients: { audience }, notification: { title } });

  const startWorker = async () => {
    const worker = await startHerald(['work'], workerEnv, (line) => line.includes('workers started'));
    workers.push(worker);
    return worker;
  };

  type Walk = { status: string; walked: number; walkEnded: boolean; targetUsers: number };
  async function walkOf(id: string): Promise<Walk> {
    const [row] = await pipeline.harness.orm.em.fork().execute<Walk[]>(
      `select status, walked, walk_ended_at is not null as "walkEnded", target_users as "targetUsers" from notifications where id = ?`,
      [id],
    );
    return row;
  }

  /** Jobs of the campaign lane not ended yet (walk slices, a broadcast's deliver jobs and their retries). */
  async function campaignJobsLeft(): Promise<number> {
    const [{ left }] = await pipeline.harness.orm.em.fork().execute<{ left: number }[]>(
      `select count(*)::int as left from ${pipeline.queueSchema}.job
        where name in ('broadcast', 'deliver_campaign') and state in ('created', 'retry', 'active')`,
    );
    return left;
  }

  const pushesTo = (prefix: string) => [
    ...pipeline.apns.received.filter((push) => push.token.startsWith(`${prefix}-`)),
    ...pipeline.fcm.received.filter((push) => push.token?.startsWith(`${prefix}-`)),
  ];

  /** Deliveries of the notification per installation: each installation walked has exactly one. */
  async function deliveriesPerInstallation(id: string): Promise<{ rows: number; installations: number }> {
    const [row] = await pipeline.harness.orm.em.fork().execute<{ rows: number; installations: number }[]>(
      `select count(*)::int as rows, count(distinct installation_id)::int as installations from deliveries where notification_id = ?`,
      [id],
    );
    return row;
  }

  test('a worker killed with SIGKILL mid-walk: the next resumes at the checkpoint, every installation gets one delivery, each device one push', async () => {
    pipeline.apns.clear();
    pipeline.fcm.clear();
    const first = await startWorker();
    const id = await broadcast(app, { all: true }, 'Everyone');

    // Pushes start while the walk goes on.
    await waitFor(() => walkOf(id), (walk) => walk.walked >= 6_000, 120_000);
    expect(pushesTo('bc').length).toBeGreaterThan(0);
    first.child.kill('SIGKILL');
    await first.stop();
    const atKill = await walkOf(id);
    expect(atKill.walkEnded).toBe(false);

    const second = await startWorker();
    const notification = await app.settled(id, 180_000);
    const walk = await walkOf(id);
    expect(walk.walked).toBe(audienceSize);
    // It resumed: the rows walked after the restart are those after the checkpoint, not the audience.
    const walkedAfterRestart = walk.walked - atKill.walked;
    expect(walkedAfterRestart).toBeLessThan(audienceSize);
    expect(second.logs.some((line) => line.includes('broadcast walk resumed at its checkpoint'))).toBe(true);

    // Every active installation of the application is considered once: 1 in 50 denied, 1 in 1,000 a
    // duplicate identifier (the one seen less recently), the rest pushed.
    const denied = audienceSize / 50;
    const duplicates = audienceSize / 1000;
    expect(await deliveriesPerInstallation(id)).toEqual({ rows: audienceSize, installations: audienceSize });
    expect(notification.status).toBe('completed');
    expect(notification.statistics).toMatchObject({ installations: audienceSize, accepted: audienceSize - denied - duplicates, skipped: denied + duplicates, failed: 0 });
    expect(notification.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));
    // target_users: the users /audiences/count counts, taken when the walk started.
    expect(walk.targetUsers).toBe((await countAudience(pipeline.harness.orm.em.fork(), app.id, { all: true })).users);
    expect(walk.targetUsers).toBeGreaterThan(0);
    const [counts] = await deliveryCounts(pipeline.harness.orm.em.fork(), [id]);
    expect(counts.pending).toBe(0);

    // Each device got its push; only the chunks in flight at the kill may have gone twice.
    const pushes = pushesTo('bc').map((push) => push.token);
    expect(new Set(pushes).size).toBe(audienceSize - denied - duplicates);
    expect(pushes.length - new Set(pushes).size).toBeLessThanOrEqual(5 * 50);
    // Another application's installations were never walked nor pushed.
    expect(pushesTo('other')).toHaveLength(0);
  }, 300_000);

  test('a walk cancelled mid-way: once the cancel has answered 200 no push of it leaves, and nothing stays pending', async () => {
    pipeline.apns.clear();
    pipeline.fcm.clear();
    // Slow pushes: the walk waits for them (its window), so the cancel comes mid-walk.
    pipeline.apns.setLatency({ min: 20, max: 40 });
    pipeline.fcm.setLatency({ min: 20, max: 40 });
    await startWorker();
    const id = await broadcast(app, { all: true }, 'Cancelled');
    await waitFor(() => walkOf(id), (walk) => walk.walked >= 3_000, 120_000);

    const res = await request(pipeline.harness.app).post(`/api/v1/notifications/${id}/cancel`).set('Authorization', `Bearer ${app.server}`);
    const answeredAt = Date.now();
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('cancelled');

    const notification = await app.settled(id, 60_000);
    expect(notification.status).toBe('cancelled');
    const walk = await walkOf(id);
    expect(walk.walked).toBeLessThan(audienceSize);
    // Every job of the campaign lane has ended (the walk, the deliver jobs queued before the cancel).
    await waitFor(() => campaignJobsLeft(), (left) => left === 0, 60_000);
    const after = pushesTo('bc').filter((push) => push.at > answeredAt);
    expect(after).toHaveLength(0);
    const [counts] = await deliveryCounts(pipeline.harness.orm.em.fork(), [id]);
    expect(counts.pending).toBe(0);
    expect(notification.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));
  }, 300_000);

  test("an audience reaches its own application's matching installations only", async () => {
    pipeline.apns.clear();
    pipeline.fcm.clear();
    await startWorker();
    // plan=pro: one in four of either application's installations.
    const id = await broadcast(other, { tags: [{ key: 'plan', op: 'eq', value: 'pro' }] }, 'Pro only');
    const notification = await other.settled(id, 60_000);
    expect(notification.status).toBe('completed');
    expect(notification.statistics.installations).toBe(2_000 / 4);
    // Its progress: the matching installations counted as the walk started (the denied included), all walked.
    expect(notification.progress).toEqual({ installations: 2_000 / 4, walked: 2_000 / 4, walk_ended_at: expect.any(String), waves: [] });
    const [{ foreign }] = await pipeline.harness.orm.em.fork().execute<{ foreign: number }[]>(
      `select count(*)::int as foreign from deliveries d join installations i on i.id = d.installation_id
        where d.notification_id = ? and (i.application_id <> ? or i.tags->>'plan' <> 'pro')`,
      [id, other.id],
    );
    expect(foreign).toBe(0);
    expect(pushesTo('bc')).toHaveLength(0);
    expect(new Set(pushesTo('other').map((push) => push.token)).size).toBeGreaterThan(0);
  }, 120_000);
});
