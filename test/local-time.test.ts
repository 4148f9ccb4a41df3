// Delivery at each device's local time (`options.local_time`), end to end on the real Postgres
// and the simulators: a user_ids send and a broadcast whose installations are in several zones,
// one zone due at once and the others hours later. The later ones wait as deferred jobs, which a
// test makes due early through pg-boss (as their time coming would), to see what they then do.
import request from 'supertest';
import { walkAudience } from '../src/db/sql/broadcasts.ts';
import { dueInstant, parseLocalTime } from '../src/domain/local-time.ts';
import { recountedStatistics } from './support/deliveries.ts';
import { ios, startPipeline, type Pipeline, type PipelineApplication } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';

let pipeline: Pipeline;
beforeAll(async () => {
  pipeline = await startPipeline();
});
afterAll(() => pipeline.close());

const api = () => request(pipeline.harness.app);
const db = () => pipeline.harness.orm.em.fork();

/**
 * The current minute in UTC as `HH:MM`, read away from a minute's end, so that the send made next
 * starts within it: installations in UTC are then due at once, the others later.
 */
async function thisMinuteInUtc(): Promise<string> {
  const now = await waitFor(() => new Date(), (date) => date.getUTCSeconds() < 55, 10_000);
  return now.toISOString().slice(11, 16);
}

const pushesTo = (prefix: string) => pipeline.apns.received.filter((push) => push.token.startsWith(prefix) && push.status === 200);

type Job = { id: string; name: string; state: string; startAfter: Date; data: Record<string, unknown> };

/** The deliver jobs that push this delivery. */
async function deliverJobsOf(deliveryId: string): Promise<Job[]> {
  return db().execute<Job[]>(
    `select id, name, state::text, start_after as "startAfter", data from ${pipeline.queueSchema}.job
      where name = 'deliver' and data->'deliveryIds' @> jsonb_build_array(?::text)`,
    [deliveryId],
  );
}

/** A deferred job made due now, as its time coming would make it (pg-boss's own update). */
async function makeDueNow(queue: string, jobId: string): Promise<void> {
  const { updated } = await pipeline.workerBoss.update(queue, undefined, { id: jobId, startAfter: 0 });
  expect(updated).toBe(1);
}

function cancel(app: PipelineApplication, id: string) {
  return api().post(`/api/v1/notifications/${id}/cancel`).set('Authorization', `Bearer ${app.server}`);
}

describe('validation', () => {
  let app: PipelineApplication;
  beforeAll(async () => {
    app = await pipeline.newApplication();
  });
  const send = (options: Record<string, unknown>) =>
    api().post('/api/v1/notifications').set('Authorization', `Bearer ${app.server}`).send({ recipients: { user_ids: ['u'] }, notification: { title: 'Hi' }, options });

  test('a local_time that is not HH:MM (24-hour) is 422 naming options.local_time', async () => {
    for (const localTime of ['24:00', '9:00', '09:60', '09:00:00', 900]) {
      const res = await send({ local_time: localTime }).expect(422);
      expect([localTime, Object.keys(res.body.errors)]).toEqual([localTime, ['options.local_time']]);
    }
    const res = await send({ local_time: '9:00' });
    expect(res.body.errors['options.local_time']).toEqual(['The options.local_time field must be a 24-hour time HH:MM (for example 09:00 or 18:30).']);
  });

  test('a timezone that is not an IANA name, or an offset, is 422 naming options.timezone', async () => {
    const unknown = await send({ local_time: '09:00', timezone: 'Mars/Olympus_Mons' }).expect(422);
    expect(Object.keys(unknown.body.errors)).toEqual(['options.timezone']);
    expect(unknown.body.errors['options.timezone'][0]).toMatch(/IANA database.*"Mars\/Olympus_Mons" is not one/);
    for (const timezone of ['+01:00', 'UTC+1', '', 'Europe/Berlin ']) {
      const res = await send({ local_time: '09:00', timezone }).expect(422);
      expect([timezone, Object.keys(res.body.errors)]).toEqual([timezone, ['options.timezone']]);
    }
  });

  test('a timezone without local_time is 422 naming options.timezone, saying it needs local_time', async () => {
    const res = await send({ timezone: 'Europe/Berlin' }).expect(422);
    expect(res.body.errors).toEqual({ 'options.timezone': [expect.stringMatching(/needs options\.local_time/)] });
  });

  test('names Node knows are accepted, aliases and letter case included, and stored as given', async () => {
    for (const timezone of ['Europe/Berlin', 'US/Eastern', 'Etc/UTC', 'UTC', 'asia/kolkata']) {
      const res = await send({ local_time: '07:30', timezone }).expect(202);
      expect(res.body.data.options).toEqual({ local_time: '07:30', timezone });
    }
  });
});

describe('a user_ids send', () => {
  test('each installation is due at the time on its own clock: the due ones pushed now, the others deferred, the notification processing', async () => {
    const app = await pipeline.newApplication({ apns: true });
    const zones: Record<string, string | null> = { utc: 'Etc/UTC', none: null, bogus: 'Nowhere/Special', york: 'America/New_York', ktm: 'Asia/Kathmandu' };
    await app.registerAll(Object.entries(zones).map(([name, timezone]) => [`lt-${name}`, ios(`lt-user-${name}`, 'lt-user', { device: { timezone } })]));
    const localTime = await thisMinuteInUtc();
    const sent = await api()
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${app.server}`)
      .send({ recipients: { user_ids: ['lt-user'] }, notification: { title: 'Good morning' }, options: { local_time: localTime, ttl: 600 } })
      .expect(202);
    const id = sent.body.data.id;
    const start = new Date(sent.body.data.created_at);

    // UTC's minute now: the UTC one, and those without a valid zone (the fallback, UTC by default).
    await waitFor(() => app.notification(id), (notification) => notification.statistics.accepted === 3, 10_000);
    expect(pushesTo('lt-user-').map((push) => push.token).sort()).toEqual(['lt-user-bogus', 'lt-user-none', 'lt-user-utc']);
    const notification = await app.notification(id);
    expect(notification).toMatchObject({ status: 'processing', completed_at: null, statistics: { installations: 5, accepted: 3, skipped: 0, failed: 0 } });

    const deliveries = new Map((await app.deliveries(id)).map((delivery) => [delivery.installation_id, delivery]));
    const dueIn = (zone: string) => dueInstant(parseLocalTime(localTime)!, zone, start);
    for (const name of ['utc', 'none', 'bogus']) expect(deliveries.get(`lt-${name}`)).toMatchObject({ state: 'accepted', scheduled_for: null });
    for (const [name, zone] of [['york', 'America/New_York'], ['ktm', 'Asia/Kathmandu']]) {
      const delivery = deliveries.get(`lt-${name}`)!;
      expect([name, delivery.state, delivery.scheduled_for]).toEqual([name, 'pending', dueIn(zone).toISOString()]);
      // Its deliver job waits in the queue, deferred to that instant.
      const jobs = await deliverJobsOf(delivery.id);
      expect(jobs.map((job) => [job.state, new Date(job.startAfter).toISOString()])).toEqual([['created', dueIn(zone).toISOString()]]);
    }
    // New York is 4 or 5 hours behind UTC, Kathmandu 5:45 ahead: hours from now, never the same instant.
    const hoursAhead = (name: string) => (new Date(deliveries.get(`lt-${name}`)!.scheduled_for!).getTime() - start.getTime()) / 3_600_000;
    expect(hoursAhead('york')).toBeGreaterThan(3.9);
    expect(hoursAhead('york')).toBeLessThanOrEqual(5);
    expect(hoursAhead('ktm')).toBeGreaterThan(18.2);
    expect(hoursAhead('ktm')).toBeLessThanOrEqual(18.25);

    // New York's time comes (made due early here): pushed, with its ttl counted from its own due time.
    const [york] = await deliverJobsOf(deliveries.get('lt-york')!.id);
    await makeDueNow('deliver', york.id);
    // The simulator has the push before the worker records its outcome: wait for the outcome.
    const afterYork = await waitFor(() => app.notification(id), (notification) => notification.statistics.accepted === 4, 10_000);
    expect(pushesTo('lt-user-york')).toHaveLength(1);
    expect(Number(pushesTo('lt-user-york')[0].expiration)).toBe(Math.floor(dueIn('America/New_York').getTime() / 1000) + 600);
    expect(Number(pushesTo('lt-user-utc')[0].expiration)).toBe(Math.floor(start.getTime() / 1000) + 600);
    // Kathmandu's is still to come: still processing.
    expect(afterYork).toMatchObject({ status: 'processing', completed_at: null });

    // Then Kathmandu's: the last one ends it.
    const [ktm] = await deliverJobsOf(deliveries.get('lt-ktm')!.id);
    await makeDueNow('deliver', ktm.id);
    const done = await app.settled(id, 10_000);
    expect(done).toMatchObject({ status: 'completed', statistics: { installations: 5, accepted: 5 } });
    expect(done.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));
  });

  test('a cancel skips the deliveries still waiting for their time, and their jobs push nothing when they come due', async () => {
    const app = await pipeline.newApplication({ apns: true });
    await app.registerAll([
      ['ltc-utc', ios('ltc-user-utc', 'ltc-user', { device: { timezone: 'UTC' } })],
      ['ltc-tokyo', ios('ltc-user-tokyo', 'ltc-user', { device: { timezone: 'Asia/Tokyo' } })],
      ['ltc-none', ios('ltc-user-none', 'ltc-user')],
    ]);
    const localTime = await thisMinuteInUtc();
    // The fallback zone given: installations without a zone are timed in Los Angeles, hours away.
    const id = await app.send({ recipients: { user_ids: ['ltc-user'] }, notification: { title: 'Later' }, options: { local_time: localTime, timezone: 'America/Los_Angeles' } });
    await waitFor(() => app.notification(id), (notification) => notification.statistics.accepted === 1, 10_000);
    const waiting = (await app.deliveries(id)).filter((delivery) => delivery.state === 'pending');
    expect(waiting.map((delivery) => delivery.installation_id).sort()).toEqual(['ltc-none', 'ltc-tokyo']);
    expect(waiting.every((delivery) => delivery.scheduled_for !== null)).toBe(true);

    const res = await cancel(app, id).expect(200);
    expect(res.body.data).toMatchObject({ status: 'cancelled', statistics: { installations: 3, accepted: 1, skipped: 2 } });
    const after = await app.deliveries(id);
    expect(after.filter((delivery) => delivery.state === 'skipped').map((delivery) => [delivery.installation_id, delivery.reason]).sort()).toEqual([
      ['ltc-none', 'cancelled'],
      ['ltc-tokyo', 'cancelled'],
    ]);
    // Their time comes anyway (the jobs stay deferred): nothing is pushed.
    const jobs = (await Promise.all(waiting.map((delivery) => deliverJobsOf(delivery.id)))).flat();
    for (const job of jobs) await makeDueNow('deliver', job.id);
    await waitFor(() => Promise.all(waiting.map((delivery) => deliverJobsOf(delivery.id))), (found) => found.flat().every((job) => job.state === 'completed'), 10_000);
    expect(pushesTo('ltc-user-').map((push) => push.token)).toEqual(['ltc-user-utc']);
    expect(await app.notification(id)).toMatchObject({ status: 'cancelled', statistics: { accepted: 1, skipped: 2 } });
  });
});

describe('a broadcast', () => {
  type Wave = { dueAt: Date; timezones: string[]; coversNull: boolean; jobId: string; walked: number; ended: boolean };
  const wavesOf = (id: string) =>
    db().execute<Wave[]>(
      `select due_at as "dueAt", timezones, covers_null as "coversNull", job_id as "jobId", walked, ended_at is not null as ended
         from broadcast_waves where notification_id = ? order by due_at`,
      [id],
    );
  const walkJob = async (jobId: string) => {
    const [job] = await db().execute<Job[]>(`select id, name, state::text, start_after as "startAfter", data from ${pipeline.queueSchema}.job where id = ?`, [jobId]);
    return job;
  };
  const walkEnded = async (id: string) => {
    const [row] = await db().execute<{ ended: boolean }[]>(`select walk_ended_at is not null as ended from notifications where id = ?`, [id]);
    return row.ended;
  };

  test('is walked in waves, one per instant: the due one at once, the others deferred with nothing written, each walked when due, cancel stops the rest', async () => {
    const app = await pipeline.newApplication({ apns: true });
    const zones: [string, string | null][] = [
      ['utc-1', 'Etc/UTC'],
      ['utc-2', 'Etc/UTC'],
      ['none-1', null],
      ['bogus-1', 'Nowhere/Special'],
      ['york-1', 'America/New_York'],
      ['york-2', 'US/Eastern'],
      ['ktm-1', 'Asia/Kathmandu'],
      ['ktm-2', 'Asia/Kathmandu'],
    ];
    await app.registerAll(
      zones.map(([name, timezone]) => [`ltb-${name}`, ios(`ltb-${name}`, `ltb-user-${name}`, { device: { timezone } })]),
    );
    const localTime = await thisMinuteInUtc();
    const sent = await api()
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${app.server}`)
      .send({ recipients: { audience: { all: true } }, notification: { title: 'Morning' }, options: { local_time: localTime } })
      .expect(202);
    const id = sent.body.data.id;
    const start = new Date(sent.body.data.created_at);
    const dueIn = (zone: string) => dueInstant(parseLocalTime(localTime)!, zone, start);

    // The wave due now (UTC's, with those without a valid zone) is walked and pushed.
    await waitFor(() => app.notification(id), (notification) => notification.statistics.accepted === 4, 10_000);
    expect(pushesTo('ltb-').map((push) => push.token).sort()).toEqual(['ltb-bogus-1', 'ltb-none-1', 'ltb-utc-1', 'ltb-utc-2']);
    const waves = await waitFor(() => wavesOf(id), (found) => found[0]?.ended === true, 10_000);
    expect(waves.map(({ dueAt, timezones, coversNull, walked, ended }) => [new Date(dueAt).toISOString(), timezones, coversNull, walked, ended])).toEqual([
      [start.toISOString(), ['Etc/UTC', 'Nowhere/Special'], true, 4, true],
      [dueIn('America/New_York').toISOString(), ['America/New_York', 'US/Eastern'], false, 0, false],
      [dueIn('Asia/Kathmandu').toISOString(), ['Asia/Kathmandu'], false, 0, false],
    ]);
    // The later waves wait as deferred walk jobs, with no delivery written for them.
    for (const wave of waves.slice(1)) {
      const job = await walkJob(wave.jobId);
      expect([job.name, job.state, new Date(job.startAfter).toISOString()]).toEqual(['broadcast', 'created', new Date(wave.dueAt).toISOString()]);
    }
    const [notification, deliveries] = [await app.notification(id), await app.deliveries(id)];
    expect(notification).toMatchObject({ status: 'processing', completed_at: null, statistics: { installations: 4, accepted: 4 } });
    // Its progress: what each wave has to walk, counted when they were planned, and what it walked.
    expect(notification.progress).toEqual({
      installations: 8,
      walked: 4,
      walk_ended_at: null,
      waves: [
        { due_at: start.toISOString(), installations: 4, walked: 4, ended_at: expect.any(String) },
        { due_at: dueIn('America/New_York').toISOString(), installations: 2, walked: 0, ended_at: null },
        { due_at: dueIn('Asia/Kathmandu').toISOString(), installations: 2, walked: 0, ended_at: null },
      ],
    });
    expect(deliveries.map((delivery) => delivery.scheduled_for)).toEqual([null, null, null, null]);
    expect(await walkEnded(id)).toBe(false);

    // New York's wave comes due: its installations are walked then, each due at its instant.
    await makeDueNow('broadcast', waves[1].jobId);
    await waitFor(() => app.notification(id), (found) => found.statistics.accepted === 6, 10_000);
    const york = (await app.deliveries(id)).filter((delivery) => delivery.installation_id.startsWith('ltb-york'));
    expect(york.map((delivery) => [delivery.state, delivery.scheduled_for])).toEqual([
      ['accepted', dueIn('America/New_York').toISOString()],
      ['accepted', dueIn('America/New_York').toISOString()],
    ]);
    expect(await app.notification(id)).toMatchObject({ status: 'processing', statistics: { installations: 6 }, progress: { installations: 8, walked: 6 } });
    expect((await app.notification(id)).progress?.waves.map((wave: { walked: number; ended_at: string | null }) => [wave.walked, wave.ended_at !== null])).toEqual([
      [4, true],
      [2, true],
      [0, false],
    ]);
    expect(await walkEnded(id)).toBe(false);

    // A cancel ends it, and drops Kathmandu's deferred wave: it never walks, nothing is written for it.
    const res = await cancel(app, id).expect(200);
    expect(res.body.data).toMatchObject({ status: 'cancelled', statistics: { installations: 6, accepted: 6 } });
    expect((await walkJob(waves[2].jobId)).state).toBe('cancelled');
    expect((await app.deliveries(id)).some((delivery) => delivery.installation_id.startsWith('ltb-ktm'))).toBe(false);
    expect(pushesTo('ltb-ktm')).toEqual([]);
    expect(res.body.data.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));
  });

  test('to a segment, ends when its last wave has been walked and pushed', async () => {
    const app = await pipeline.newApplication({ apns: true });
    await app.registerAll([
      ['lte-utc', ios('lte-utc', 'lte-1', { device: { timezone: 'UTC' } })],
      ['lte-tokyo', ios('lte-tokyo', 'lte-2', { device: { timezone: 'Asia/Tokyo' } })],
    ]);
    await api().put('/api/v1/segments/everyone').set('Authorization', `Bearer ${app.server}`).send({ audience: { all: true } }).expect(201);
    const localTime = await thisMinuteInUtc();
    const id = await app.send({ recipients: { segment: 'everyone' }, notification: { title: 'Hi' }, options: { local_time: localTime } });
    const waves = await waitFor(() => wavesOf(id), (found) => found.length === 2 && found[0].ended, 10_000);
    await waitFor(() => app.notification(id), (notification) => notification.statistics.accepted === 1, 10_000);
    expect((await app.notification(id)).status).toBe('processing');
    await makeDueNow('broadcast', waves[1].jobId);
    const done = await app.settled(id, 10_000);
    expect(done).toMatchObject({ status: 'completed', target_users: 2, statistics: { users: 2, installations: 2, accepted: 2 } });
    expect(done.progress).toMatchObject({ installations: 2, walked: 2, walk_ended_at: expect.any(String) });
    expect(await walkEnded(id)).toBe(true);
    expect((await wavesOf(id)).map((wave) => [wave.walked, wave.ended])).toEqual([
      [1, true],
      [1, true],
    ]);
  });

  test("a wave's batches read the audience's installations in order and keep the wave's: the checkpoint passes the others", async () => {
    const app = await pipeline.newApplication({ apns: true });
    const zones = ['Asia/Tokyo', 'UTC', 'UTC', null, 'Asia/Tokyo', 'UTC', 'bogus', 'UTC'];
    await app.registerAll(zones.map((timezone, i) => [`ltw-${i}`, ios(`ltw-${i}`, `ltw-user-${i}`, { device: { timezone } })]));
    const wave = { timezones: ['Asia/Tokyo', 'bogus'], coversNull: true };
    const walked: string[] = [];
    const checkpoints: (string | null)[] = [];
    let walkAfter: string | null = null;
    for (let ended = false; !ended; ) {
      const batch = await walkAudience(db(), { applicationId: app.id, audience: { all: true }, walkAfter, withLocale: false, wave }, 2);
      walked.push(...batch.candidates.map((candidate) => candidate.providerIdentifier));
      checkpoints.push(batch.last);
      walkAfter = batch.last ?? walkAfter;
      ended = batch.ended;
    }
    expect(walked).toEqual(['ltw-0', 'ltw-3', 'ltw-4', 'ltw-6']);
    // Two installations a batch, whatever share of them is the wave's (none, in the second and last).
    expect(checkpoints).toEqual(['ltw-1', 'ltw-3', 'ltw-5', 'ltw-7', null]);
  });

  test('with no installation matched, no wave is planned and it completes empty', async () => {
    const app = await pipeline.newApplication({ apns: true });
    // A fresh application: no installation at all.
    const id = await app.send({ recipients: { audience: { all: true } }, notification: { title: 'Hi' }, options: { local_time: '09:00' } });
    const done = await app.settled(id, 10_000);
    expect(done).toMatchObject({ status: 'completed', statistics: { installations: 0 } });
    expect(await wavesOf(id)).toEqual([]);
  });
});
