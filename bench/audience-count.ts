// The audience-count benchmark (`make bench-audience-count`). On a fresh database that is dropped
// at the end whatever happens: 1,000,000 installations of one application, prefilled by one
// generate_series statement (half iOS, half Android; 2 % permission denied, 3 % not determined; 5 %
// without a user, the others spread over 700,000 users; tags `plan` (free 50 %, trial 40 %, pro
// 10 %), `country` (10 values) and `beta` on 5 %; 8 locales; last seen spread over 90 days; 0.5 %
// sharing another installation's push identifier). Then POST /api/v1/audiences/count through
// Herald's real app on a port, for three audiences:
//   all           { all: true }
//   tag eq 10 %   { tags: [plan eq pro] }
//   combined      { platforms: [android], tags: [country in de/fr/es], active_within_days: 30 }
// each run once right after the prefill and its ANALYZE (cold: the first count the database has
// planned and run on these rows; the operating system's cache may still hold pages), then 20 times
// in a row (warm): p50 and p95 against the goal (p95 ≤ 300 ms), ok/MISS. It exits 0 whatever the
// figures are (a measurement, not a test); non-zero only when the run itself failed.
//
// Environment (all optional):
//   DATABASE_URL            admin URL of the Postgres server (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_INSTALLATIONS     installations to prefill (1000000)
//   BENCH_RUNS              warm runs per audience (20)
//   BENCH_JSON              write the figures to this file instead of bench/results/audience-count-<UTC time>.json
import { randomBytes } from 'node:crypto';
import type { Audience } from '../src/domain/audiences.ts';
import { prefilledBench } from './prefill-installations.ts';
import {
  createCleanups,
  fixed,
  integer,
  percentile,
  positiveIntegerFromEnv,
  runBenchmark,
  writeResults,
} from './support.ts';

const settings = {
  adminUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  installations: positiveIntegerFromEnv('BENCH_INSTALLATIONS', 1_000_000),
  runs: positiveIntegerFromEnv('BENCH_RUNS', 20),
};
const goalMs = 300;

const audiences: { name: string; audience: Audience }[] = [
  { name: 'all', audience: { all: true } },
  { name: 'tag eq 10 %', audience: { tags: [{ key: 'plan', op: 'eq', value: 'pro' }] } },
  {
    name: 'combined',
    audience: { platforms: ['android'], tags: [{ key: 'country', op: 'in', values: ['de', 'fr', 'es'] }], active_within_days: 30 },
  },
];

async function main(): Promise<number> {
  const cleanups = createCleanups();
  const database = `herald_bench_audience_${randomBytes(4).toString('hex')}`;
  return runBenchmark(
    'bench-audience-count',
    async () => {
      const { token, api, prefill } = await prefilledBench({
        adminUrl: settings.adminUrl,
        database,
        application: 'audience bench',
        installations: settings.installations,
        cleanups,
      });
      const count = async (audience: Audience) => {
        const at = performance.now();
        const response = await fetch(`${api}/api/v1/audiences/count`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ audience }),
        });
        const body = (await response.json()) as { data?: { installations: number; users: number } };
        if (response.status !== 200 || !body.data) throw new Error(`count answered ${response.status}: ${JSON.stringify(body)}`);
        return { ms: performance.now() - at, ...body.data };
      };

      const figures = [];
      for (const { name, audience } of audiences) {
        const cold = await count(audience);
        const warm = [];
        for (let run = 0; run < settings.runs; run++) warm.push((await count(audience)).ms);
        const p50 = percentile(warm, 50);
        const p95 = percentile(warm, 95);
        const ok = p95 <= goalMs;
        process.stdout.write(
          `${name.padEnd(12)} ${integer(cold.installations).padStart(9)} installations ${integer(cold.users).padStart(9)} users  ` +
            `cold ${fixed(cold.ms, 0).padStart(5)} ms  warm p50 ${fixed(p50, 0).padStart(5)} ms  p95 ${fixed(p95, 0).padStart(5)} ms  ` +
            `(goal p95 ≤ ${goalMs} ms) ${ok ? 'ok' : 'MISS'}\n`,
        );
        figures.push({ name, audience, installations: cold.installations, users: cold.users, coldMs: cold.ms, warmMs: warm, p50Ms: p50, p95Ms: p95, goalMs, ok });
      }
      writeResults('audience-count', {
        settings,
        prefill,
        counts: figures,
      });
      return 0;
    },
    cleanups,
  );
}

await main();
