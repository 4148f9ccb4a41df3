// Counts sends against an application's policy: a fixed window per application, counted in
// Postgres so that every API process shares it (rate-limiter-flexible's Postgres store).
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { boundedConnections, defaultBounds, type DatabaseBounds } from '../db/bounds.ts';
import { openListenedPool } from '../db/pools.ts';
import type { SendPolicy } from '../domain/rate-limits.ts';

export type SendAllowance = SendPolicy & { allowed: boolean; remaining: number; resetSeconds: number };

export type SendLimiter = {
  /** Takes one send from the window, or reports that none is left. */
  consume(applicationId: string, policy: SendPolicy): Promise<SendAllowance>;
  /** What is left, without taking anything (answers that send nothing still announce it). */
  peek(applicationId: string, policy: SendPolicy): Promise<SendAllowance>;
  /** Gives back a send that did not happen after all (a concurrent duplicate that became a replay). */
  refund(applicationId: string, policy: SendPolicy): Promise<void>;
  close(): Promise<void>;
};

/**
 * On a pool of its own, whose connections commit without waiting for the WAL flush: a server
 * crash loses at most the last fraction of a second of counts (a window a little more lenient
 * once), never a notification, whose own COMMIT still waits. Synchronous, the counter's upsert would
 * wait under a fanout for the workers' WAL flushes (and the same application's previous upsert on
 * its row), and be the slowest answer of a send's first round trip (docs/DESIGN.md, "Rate limit").
 */
export function openSendLimiter(url: string, max: number, bounds: DatabaseBounds = defaultBounds): SendLimiter {
  const pool = openListenedPool({ connectionString: url, max, options: '-c synchronous_commit=off', ...boundedConnections(bounds) });
  // One limiter per distinct policy; they share the table, keyed by policy and application so a
  // changed policy starts a fresh window.
  const limiters = new Map<string, RateLimiterPostgres>();
  const limiterFor = (policy: SendPolicy) => {
    const name = `send:${policy.quota}:${policy.windowSeconds}`;
    let limiter = limiters.get(name);
    if (!limiter) {
      limiter = new RateLimiterPostgres({
        storeClient: pool,
        storeType: 'pool',
        tableName: 'rate_limits',
        tableCreated: true,
        keyPrefix: name,
        points: policy.quota,
        duration: policy.windowSeconds,
      });
      limiters.set(name, limiter);
    }
    return limiter;
  };
  const allowance = (policy: SendPolicy, res: RateLimiterRes | null, allowed: boolean): SendAllowance => ({
    ...policy,
    allowed,
    remaining: res ? Math.max(0, res.remainingPoints) : policy.quota,
    resetSeconds: res ? Math.max(0, Math.ceil(res.msBeforeNext / 1000)) : policy.windowSeconds,
  });
  return {
    async consume(applicationId, policy) {
      try {
        return allowance(policy, await limiterFor(policy).consume(applicationId), true);
      } catch (rejection) {
        if (rejection instanceof RateLimiterRes) return allowance(policy, rejection, false);
        throw rejection;
      }
    },
    async peek(applicationId, policy) {
      const res = await limiterFor(policy).get(applicationId);
      return allowance(policy, res, (res?.remainingPoints ?? policy.quota) > 0);
    },
    async refund(applicationId, policy) {
      await limiterFor(policy).reward(applicationId, 1);
    },
    close: () => pool.end(),
  };
}
