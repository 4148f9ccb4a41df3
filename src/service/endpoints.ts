// Where the providers are, as configured: Apple's and Google's own hosts unless the settings name
// others (simulators), and the CA to trust for those. Apart from the service, so that an admin
// command asking a provider loads nothing of the API or the workers.
import { readFileSync } from 'node:fs';
import type { Config } from './config.ts';
import type { ProviderEndpoints } from '../providers/provider.ts';

export function configuredEndpoints(config: Config): ProviderEndpoints {
  return {
    apns: config.HERALD_APNS_ENDPOINT,
    fcm: config.HERALD_FCM_ENDPOINT,
    ca: config.HERALD_PROVIDER_CA_FILE ? readFileSync(config.HERALD_PROVIDER_CA_FILE, 'utf8') : undefined,
    webPushAllowPrivate: config.HERALD_WEBPUSH_ALLOW_PRIVATE,
  };
}
