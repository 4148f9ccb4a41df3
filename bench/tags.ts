// The tag-summary benchmark (`make bench-tags`). On a fresh database that is dropped at the end
// whatever happens: the 1,000,000 installations of bench/audience-count.ts (bench/prefill-installations.ts:
// tags `plan`, `country` and `beta`). Then:
//   first read   GET /api/v1/tags of an application without a summary, too large to compute in the
//                request: answered at once with refreshed_at null (and a job queued, which no worker takes here)
//   refresh      the worker's computation of the summary (domain/tag-summaries.ts refreshTagSummary),
//                once cold (right after the prefill's ANALYZE) and BENCH_REFRESHES times more
//   read         GET /api/v1/tags through Herald's real app on a port, BENCH_RUNS times: p50 and p95
//                against the goal (p95 ≤ 300 ms), ok/MISS
// It exits 0 whatever the figures are (a measurement, not a test); non-zero only when the run itself failed.
//
// Environment (all optional):
//   DATABASE_URL            admin URL of the Postgres server (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_INSTALLATIONS     installations to prefill (1000000)
//   BENCH_RUNS              reads (50)
//   BENCH_REFRESHES         warm computations (3)
//   BENCH_JSON              write the figures to this file instead of bench/results/tags-<UTC time>.json
import { randomBytes } from 'node:crypto';
import { refreshTagSummary, tagSummarySettings } from '../src/domain/tag-summaries.ts';
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
  runs: positiveIntegerFromEnv('BENCH_RUNS', 50),
  refreshes: positiveIntegerFromEnv('BENCH_REFRESHES', 3),
};
const goalMs = 300;

type Summary = { data: { key: string; installations: number; values: { value: string; installations: number }[] }[]; refreshed_at: string | null };

async function main(): Promise<number> {
  const cleanups = createCleanups();
  const database = `herald_bench_tags_${randomBytes(4).toString('hex')}`;
  return runBenchmark(
    'bench-tags',
    async () => {
      const { orm, applicationId, token, api, prefill } = await prefilledBench({
        adminUrl: settings.adminUrl,
        database,
        application: 'tags bench',
        installations: settings.installations,
        cleanups,
      });
      const read = async () => {
        const at = performance.now();
        const response = await fetch(`${api}/api/v1/tags`, { headers: { authorization: `Bearer ${token}` } });
        const body = (await response.json()) as Summary;
        if (response.status !== 200) throw new Error(`GET /api/v1/tags answered ${response.status}: ${JSON.stringify(body)}`);
        return { ms: performance.now() - at, body };
      };

      const first = await read();
      const firstOk = first.body.refreshed_at === null && settings.installations > tagSummarySettings.computeInRequestUpTo;
      process.stdout.write(`first read   ${fixed(first.ms, 0).padStart(6)} ms  refreshed_at ${first.body.refreshed_at} (expected null past ${integer(tagSummarySettings.computeInRequestUpTo)} installations)\n`);

      const refreshMs: number[] = [];
      for (let run = 0; run <= settings.refreshes; run++) {
        const at = performance.now();
        await refreshTagSummary(orm.em.fork(), applicationId, tagSummarySettings.statementSeconds);
        refreshMs.push(performance.now() - at);
      }
      const [coldRefreshMs, ...warmRefreshMs] = refreshMs;
      process.stdout.write(
        `refresh      cold ${fixed(coldRefreshMs / 1000, 2)} s  warm ${warmRefreshMs.map((ms) => fixed(ms / 1000, 2)).join(', ')} s (every active installation's tags counted)\n`,
      );

      const reads = [];
      let answer: Summary | null = null;
      for (let run = 0; run < settings.runs; run++) {
        const { ms, body } = await read();
        reads.push(ms);
        answer = body;
      }
      const p50 = percentile(reads, 50);
      const p95 = percentile(reads, 95);
      const ok = p95 <= goalMs;
      const keys = answer!.data.map((key) => `${key.key} ${integer(key.installations)} (${key.values.length} values)`).join(', ');
      process.stdout.write(
        `read         p50 ${fixed(p50, 1).padStart(6)} ms  p95 ${fixed(p95, 1).padStart(6)} ms  (goal p95 ≤ ${goalMs} ms) ${ok ? 'ok' : 'MISS'}  keys: ${keys}\n`,
      );
      writeResults('tags', {
        settings,
        prefill,
        firstRead: { ms: first.ms, refreshedAt: first.body.refreshed_at, ok: firstOk },
        refresh: { coldMs: coldRefreshMs, warmMs: warmRefreshMs },
        read: { ms: reads, p50Ms: p50, p95Ms: p95, goalMs, ok },
        summary: answer,
      });
      return 0;
    },
    cleanups,
  );
}

await main();
