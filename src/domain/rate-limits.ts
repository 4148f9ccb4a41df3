// Per-application send quotas: each application's policy (quota per window), or the service's
// default. The API counts sends against it (http/send-limiter.ts).
import type { EntityManager } from '@mikro-orm/postgresql';
import { Application } from '../db/entities.ts';

export type SendPolicy = { quota: number; windowSeconds: number };

/** An application's own policy where it has one, the service's default otherwise. */
export function effectiveSendPolicy(own: { quota: number | null; windowSeconds: number | null }, fallback: SendPolicy): SendPolicy {
  return { quota: own.quota ?? fallback.quota, windowSeconds: own.windowSeconds ?? fallback.windowSeconds };
}

export async function setSendPolicy(em: EntityManager, applicationId: string, policy: SendPolicy | null): Promise<void> {
  await em.nativeUpdate(
    Application,
    { id: applicationId },
    { sendQuota: policy?.quota ?? null, sendWindowSeconds: policy?.windowSeconds ?? null },
  );
}
