// The send quota of the authenticated application. Every send answer past authentication (202,
// 422, 429, and the 400/413/415 of a bad body) announces it with the IETF draft fields
// RateLimit-Policy and RateLimit; only a send that would create a notification takes from it.
import type { ErrorRequestHandler, Request, Response } from 'express';
import { HttpError, messages } from '../domain/errors.ts';
import { effectiveSendPolicy, type SendPolicy } from '../domain/rate-limits.ts';
import type { SendAllowance, SendLimiter } from './send-limiter.ts';
import { principalOf } from './auth.ts';
import { sendAnswered } from '../observability/metrics.ts';

export type SendQuota = {
  /** Takes one send; sets the fields; throws 429 (with Retry-After) when none is left. */
  admit(req: Request, res: Response): Promise<void>;
  /** Gives back the send admit() took (the send turned out to be a replay). */
  refund(req: Request, res: Response): Promise<void>;
  /** Sets the fields from what is left, taking nothing. */
  announce(req: Request, res: Response): Promise<void>;
};

function setFields(res: Response, allowance: SendAllowance): void {
  res.setHeader('RateLimit-Policy', `"send";q=${allowance.quota};w=${allowance.windowSeconds}`);
  res.setHeader('RateLimit', `"send";r=${allowance.remaining};t=${allowance.resetSeconds}`);
}

export function sendQuota(limiter: SendLimiter, fallback: SendPolicy): SendQuota {
  const policyOf = (req: Request) => effectiveSendPolicy(principalOf(req).sendPolicy, fallback);
  return {
    async admit(req, res) {
      const { applicationId } = principalOf(req);
      const allowance = await limiter.consume(applicationId, policyOf(req));
      setFields(res, allowance);
      if (!allowance.allowed) {
        throw new HttpError(429, messages.tooManyRequests, undefined, {
          'Retry-After': String(Math.max(1, allowance.resetSeconds)),
        });
      }
    },
    async refund(req, res) {
      const policy = policyOf(req);
      await limiter.refund(principalOf(req).applicationId, policy);
      setFields(res, await limiter.peek(principalOf(req).applicationId, policy));
    },
    async announce(req, res) {
      setFields(res, await limiter.peek(principalOf(req).applicationId, policyOf(req)));
    },
  };
}

/**
 * An error answer of the send operation past authentication (a bad body, a 422) still carries the
 * quota fields. Before authentication there is no application, so nothing to announce. A 429 is
 * counted here, where it is answered: a refused send that turns out to be a replay is not one.
 */
export function announceQuotaOnError(quota: SendQuota, path: string): ErrorRequestHandler {
  return async (error, req, res, next) => {
    if (req.method === 'POST' && req.path === path && !res.headersSent) {
      if (error instanceof HttpError && error.status === 429) sendAnswered(principalOf(req).applicationId, 'rate_limited');
      if (!res.hasHeader('RateLimit')) {
        try {
          await quota.announce(req, res);
        } catch {
          // Unauthenticated, or the database is down: the error being answered is what matters.
        }
      }
    }
    next(error);
  };
}
