// The send quota of the authenticated application, announced on every send answer with the
// IETF draft fields (RateLimit-Policy, RateLimit), and enforced with 429 + Retry-After.
import type { RequestHandler } from 'express';
import type { Orm } from '../db/orm.ts';
import { HttpError, messages } from '../domain/errors.ts';
import { sendPolicy, type SendLimiter, type SendPolicy } from '../domain/rate-limits.ts';
import { principalOf } from './auth.ts';

export function sendRateLimit(orm: Orm, limiter: SendLimiter, fallback: SendPolicy): RequestHandler {
  return async (req, res, next) => {
    const { applicationId } = principalOf(req);
    const policy = await sendPolicy(orm.em.fork(), applicationId, fallback);
    const allowance = await limiter.consume(applicationId, policy);
    res.setHeader('RateLimit-Policy', `"send";q=${policy.quota};w=${policy.windowSeconds}`);
    res.setHeader('RateLimit', `"send";r=${Math.max(0, allowance.remaining)};t=${allowance.resetSeconds}`);
    if (allowance.allowed) return next();
    next(new HttpError(429, messages.tooManyRequests, undefined, { 'Retry-After': String(Math.max(1, allowance.resetSeconds)) }));
  };
}
