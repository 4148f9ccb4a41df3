// `herald credentials check`: asks each provider now whether it accepts an application's
// credentials, with a push no device receives, and records the answer as the workers would.
// APNs: a push to a made-up device token, which Apple checks only after the credentials (so
// `BadDeviceToken` means they were accepted). FCM: a `validate_only` send, checked and not sent.
// Web Push has no such push: its key pair is not asked about.
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import {
  checkVerdict,
  listCredentials,
  openCredential,
  UnopenableSecret,
  unopenableReason,
  type CheckVerdict,
  type Provider,
} from '../domain/credentials.ts';
import { markCredentialHealthy, markCredentialUnhealthy, markCredentialUnreachable } from '../db/sql/credentials.ts';
import type { ProviderCredential } from '../db/entities.ts';
import type { Logger } from '../logging/logger.ts';
import type { ProviderEndpoints, Push, PushOutcome } from '../providers/provider.ts';

export type CredentialCheck = { provider: Provider; verdict: CheckVerdict };

/** 64 hex digits, the form of a real device token, that no device has. */
const madeUpDeviceToken = '0'.repeat(64);
const madeUpRegistrationToken = 'herald-credentials-check';

/** Checks each of the application's credentials (or `only` one provider's) and records each answer. */
export async function checkCredentials(
  em: EntityManager,
  options: { applicationId: string; only?: Provider; key: Buffer; endpoints: ProviderEndpoints; logger: Logger },
): Promise<CredentialCheck[]> {
  const checks: CredentialCheck[] = [];
  for (const credential of await listCredentials(em, options.applicationId)) {
    if (options.only && credential.provider !== options.only) continue;
    // A push service judges a VAPID key only on a push to a subscription made with it, and has no
    // dry run: web credentials are verified by the first push a push service accepts.
    if (credential.provider === 'webpush') continue;
    const verdict = await ask(credential, options);
    if (verdict.kind === 'accepted') await markCredentialHealthy(em, credential.id);
    else if (verdict.kind === 'unreachable') await markCredentialUnreachable(em, credential.id);
    else await markCredentialUnhealthy(em, credential.id, verdict.reason);
    checks.push({ provider: credential.provider, verdict });
  }
  return checks;
}

async function ask(credential: ProviderCredential, options: { key: Buffer; endpoints: ProviderEndpoints; logger: Logger }): Promise<CheckVerdict> {
  // The adapters' warning of a refusal would repeat the verdict the command prints.
  const logger = options.logger.child({ applicationId: credential.applicationId, provider: credential.provider }, { level: 'error' });
  const push = (providerIdentifier: string): Push => ({
    deliveryId: randomUUID(),
    notificationId: randomUUID(),
    providerIdentifier,
    content: { notification: { title: 'Herald credentials check' } },
    expiresAt: null,
  });
  let outcomes: PushOutcome[];
  try {
    if (credential.provider === 'apns') {
      const { createApnsProvider } = await import('../providers/apns.ts');
      const secrets = openCredential(credential as ProviderCredential & { provider: 'apns' }, options.key);
      const provider = createApnsProvider(secrets, options.endpoints, logger);
      outcomes = await provider.send([push(madeUpDeviceToken)]).finally(() => provider.close());
    } else {
      const { createFcmProvider } = await import('../providers/fcm.ts');
      const secrets = openCredential(credential as ProviderCredential & { provider: 'fcm' }, options.key);
      const provider = createFcmProvider(secrets, options.endpoints, logger);
      outcomes = await provider.send([push(madeUpRegistrationToken)], { validateOnly: true }).finally(() => provider.close());
    }
  } catch (error) {
    if (error instanceof UnopenableSecret) return { kind: 'refused', reason: unopenableReason };
    throw error;
  }
  return checkVerdict(outcomes[0]);
}
