// The dashboard's only way to the API: the SDK's client (sdk/src, over the generated code), made
// for the signed-in token. Calls throw HeraldError (Herald answered: its status and message) or
// HeraldNetworkError (no answer); the shell turns 401 and 503 into a sign-out and a banner.
import { createHerald, type Herald } from '../../sdk/src/index.ts';

export { HeraldError, HeraldNetworkError, type Herald } from '../../sdk/src/index.ts';
export type {
  Application,
  Audience,
  AudienceCount,
  Delivery,
  DeliveryBreakdown,
  DeliveryState,
  HourStats,
  Installation,
  Notification,
  NotificationSend,
  NotificationStatus,
  Platform,
  ProviderStatus,
  Segment,
  WebhookEndpoint,
} from '../../sdk/src/index.ts';

/**
 * Herald's base URL: where this page is, one level up from /dashboard (under a proxy's path
 * prefix, the prefix is kept: /herald/dashboard calls /herald/api/v1/…).
 */
export const apiBase = (): string => new URL('.', window.location.href).href.replace(/\/$/, '');

/**
 * A client for the Herald that serves this page. No retries: a 503 is shown at once as a banner
 * while the views keep polling, rather than held back for up to 30 s.
 */
export const connect = (token: string): Herald => createHerald({ baseUrl: apiBase(), token, retry: false, timeoutMs: 15_000 });
