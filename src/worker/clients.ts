// Long-lived provider clients, one per application credential: an APNs HTTP/2 session or an FCM
// client (its kept connections and OAuth token) is opened once and reused by every batch, rebuilt when the credential
// changes or when the client keeps failing to reach its provider (a wedged HTTP/2 session does
// not heal by itself). Never one connection per push.
// A provider's library (@parse/node-apn, google-auth-library, each large in memory) is imported when
// the first client of that provider is opened, not at start: an API-only process, or a worker
// whose applications all use one provider, never loads the other.
import type { EntityManager } from '@mikro-orm/postgresql';
import { openCredential, type ApnsCredentials, type FcmCredentials, type Provider, type WebPushCredentials } from '../domain/credentials.ts';
import { ProviderCredential } from '../db/entities.ts';
import type { CredentialVersion } from '../db/sql/deliveries.ts';
import type { Logger } from '../logging/logger.ts';
import type { ProviderEndpoints, PushProvider } from '../providers/provider.ts';

export type ProviderClient = { credentialId: string; provider: PushProvider };
export type ProviderClients = {
  /**
   * The application's client for the provider; null without a credential. `current`: the
   * credential's id and version as the batch just read them (readBatch; null: none), so that a
   * cached client costs no round trip; the row is read only to open a new one.
   */
  get(em: EntityManager, applicationId: string, provider: Provider, current: CredentialVersion | null): Promise<ProviderClient | null>;
  /**
   * After each batch: whether it reached the provider at all. A client that missed it
   * `rebuildAfter` batches in a row, or whose connection is wedged (`broken`), is closed, and the
   * next batch opens a fresh one. `broken` with `sentAt` (performance.now() as the batch was handed
   * over): every push of the batch timed out, which says the connection is wedged only if no other
   * batch on it was answered since; if one was, the provider is slow, and it counts as `unreachable`.
   */
  report(client: ProviderClient, result: 'reached' | 'unreachable' | 'broken', sentAt?: number): void;
  close(): Promise<void>;
};

/** `reachedAt`: performance.now() of the last batch that reached the provider. */
type Cached = ProviderClient & { version: number; unreachable: number; reachedAt: number };

/** Batches in a row that could not reach the provider before its client is rebuilt. */
const rebuildAfter = 3;

type Factory<C> = (credentials: C, endpoints: ProviderEndpoints, logger: Logger) => PushProvider;

export function createProviderClients(options: {
  key: Buffer | null;
  endpoints: ProviderEndpoints;
  logger: Logger;
}): ProviderClients {
  const cache = new Map<string, Cached>();
  const factories: { apns?: Factory<ApnsCredentials>; fcm?: Factory<FcmCredentials>; webpush?: Factory<WebPushCredentials> } = {};
  const importFactory = async (provider: Provider) => {
    if (provider === 'apns') factories.apns ??= (await import('../providers/apns.ts')).createApnsProvider;
    else if (provider === 'fcm') factories.fcm ??= (await import('../providers/fcm.ts')).createFcmProvider;
    else factories.webpush ??= (await import('../providers/web-push.ts')).createWebPushProvider;
  };
  /** Synchronous once the provider's factory is imported. */
  const open = (credential: ProviderCredential): PushProvider => {
    if (!options.key) throw new Error('HERALD_CREDENTIALS_KEY is not set: provider credentials cannot be read.');
    const logger = options.logger.child({ applicationId: credential.applicationId, provider: credential.provider });
    if (credential.provider === 'apns') {
      return factories.apns!(openCredential(credential as ProviderCredential & { provider: 'apns' }, options.key), options.endpoints, logger);
    }
    if (credential.provider === 'webpush') {
      return factories.webpush!(openCredential(credential as ProviderCredential & { provider: 'webpush' }, options.key), options.endpoints, logger);
    }
    return factories.fcm!(openCredential(credential as ProviderCredential & { provider: 'fcm' }, options.key), options.endpoints, logger);
  };

  return {
    async get(em, applicationId, provider, current) {
      const cacheKey = `${applicationId}:${provider}`;
      // The client opened with the credential as the batch read it (id and version).
      const usable = (entry: Cached | undefined): entry is Cached =>
        current !== null && entry !== undefined && entry.credentialId === current.id && entry.version === current.version;
      const known = cache.get(cacheKey);
      if (usable(known)) return known;
      const credential = current && (await em.findOne(ProviderCredential, { id: current.id }, { disableIdentityMap: true }));
      // Read after the await: a concurrent batch may have opened the client meanwhile.
      const cached = cache.get(cacheKey);
      if (!credential) {
        cache.delete(cacheKey);
        await cached?.provider.close();
        return null;
      }
      if (usable(cached)) return cached;
      if (!factories[provider]) {
        // The first client of this provider: its library is imported now. A concurrent batch may
        // have opened the client meanwhile.
        await importFactory(provider);
        const meanwhile = cache.get(cacheKey);
        if (usable(meanwhile)) return meanwhile;
      }
      // No await between the lookup and the set: concurrent batches share one client.
      const replaced = cache.get(cacheKey);
      const fresh = { credentialId: credential.id, version: current.version, provider: open(credential), unreachable: 0, reachedAt: 0 };
      cache.set(cacheKey, fresh);
      await replaced?.provider.close();
      return fresh;
    },
    report(client, result, sentAt) {
      const cached = [...cache.entries()].find(([, entry]) => entry === client);
      if (!cached) return;
      const [cacheKey, entry] = cached;
      if (result === 'reached') entry.reachedAt = performance.now();
      const wedged = result === 'broken' && !(sentAt !== undefined && entry.reachedAt > sentAt);
      entry.unreachable = result === 'reached' ? 0 : entry.unreachable + 1;
      if (wedged || entry.unreachable >= rebuildAfter) {
        cache.delete(cacheKey);
        options.logger.warn({ cacheKey, result, batches: entry.unreachable }, 'provider client rebuilt: it could not reach its provider');
        // Batches still using it finish or fail on their own; close() is bounded by the adapters.
        void entry.provider.close().catch(() => undefined);
      }
    },
    async close() {
      const clients = [...cache.values()];
      cache.clear();
      await Promise.all(clients.map((client) => client.provider.close()));
    },
  };
}
