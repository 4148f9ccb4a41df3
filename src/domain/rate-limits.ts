// Per-application send quotas: each application's policy (quota per window), or the service's
// default. The API counts sends against it (http/send-limiter.ts).
import type { EntityManager } from '@mikro-orm/postgresql';
import { Application } from '../db/entities.ts';

export type SendPolicy = { quota: number; windowSeconds: number };

export async function sendPolicy(em: EntityManager, applicationId: string, fallback: SendPolicy): Promise<SendPolicy> {
  const application = await em.findOne(Application, { id: applicationId }, { fields: ['sendQuota', 'sendWindowSeconds'] });
  return {
    quota: application?.sendQuota ?? fallback.quota,
    windowSeconds: application?.sendWindowSeconds ?? fallback.windowSeconds,
  };
}

export async function setSendPolicy(em: EntityManager, applicationId: string, policy: SendPolicy | null): Promise<void> {
  await em.nativeUpdate(
    Application,
    { id: applicationId },
    { sendQuota: policy?.quota ?? null, sendWindowSeconds: policy?.windowSeconds ?? null },
  );
}
