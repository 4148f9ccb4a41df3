// A platform is served by one provider, and its installations' push address is that provider's
// kind of token.
import type { components } from '../generated/api.ts';
import type { Provider } from './credentials.ts';

export type Platform = components['schemas']['Platform'];

export const providerOf = { ios: 'apns', android: 'fcm', web: 'webpush' } as const satisfies Record<Platform, Provider>;

export const providerIdentifierType = {
  ios: 'apns_token',
  android: 'fcm_token',
  web: 'web_push_subscription',
} as const satisfies Record<Platform, components['schemas']['Installation']['provider_identifier_type']>;
