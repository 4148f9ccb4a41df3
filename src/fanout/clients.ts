// Long-lived provider clients, one per application credential: an APNs HTTP/2 session or a
// firebase-admin app is opened once and reused by every batch, rebuilt only when the credential
// changes. Never one connection per push.
import type { EntityManager } from '@mikro-orm/postgresql';
import { openCredential, type Provider } from '../domain/credentials.ts';
import { ProviderCredential } from '../domain/entities.ts';
import type { Logger } from '../logger.ts';
import { createApnsProvider } from '../providers/apns.ts';
import { createFcmProvider } from '../providers/fcm.ts';
import type { ProviderEndpoints, PushProvider } from '../providers/provider.ts';

export type ProviderClient = { credentialId: string; provider: PushProvider };
export type ProviderClients = {
  get(em: EntityManager, applicationId: string, provider: Provider): Promise<ProviderClient | null>;
  close(): Promise<void>;
};

type Cached = ProviderClient & { version: number };

export const providerOf = { ios: 'apns', android: 'fcm' } as const satisfies Record<string, Provider>;

export function createProviderClients(options: {
  key: Buffer | null;
  endpoints: ProviderEndpoints;
  logger: Logger;
}): ProviderClients {
  const cache = new Map<string, Cached>();
  const open = (credential: ProviderCredential): PushProvider => {
    if (!options.key) throw new Error('HERALD_CREDENTIALS_KEY is not set: provider credentials cannot be read.');
    const logger = options.logger.child({ applicationId: credential.applicationId, provider: credential.provider });
    return credential.provider === 'apns'
      ? createApnsProvider(openCredential(credential as ProviderCredential & { provider: 'apns' }, options.key), options.endpoints, logger)
      : createFcmProvider(openCredential(credential as ProviderCredential & { provider: 'fcm' }, options.key), options.endpoints, logger);
  };

  return {
    async get(em, applicationId, provider) {
      const credential = await em.findOne(ProviderCredential, { applicationId, provider }, { disableIdentityMap: true });
      const cacheKey = `${applicationId}:${provider}`;
      const cached = cache.get(cacheKey);
      if (!credential) {
        cache.delete(cacheKey);
        await cached?.provider.close();
        return null;
      }
      const version = credential.updatedAt.getTime();
      if (cached && cached.credentialId === credential.id && cached.version === version) return cached;
      // No await between the lookup and the set: concurrent batches share one client.
      const fresh = { credentialId: credential.id, version, provider: open(credential) };
      cache.set(cacheKey, fresh);
      await cached?.provider.close();
      return fresh;
    },
    async close() {
      const clients = [...cache.values()];
      cache.clear();
      await Promise.all(clients.map((client) => client.provider.close()));
    },
  };
}
