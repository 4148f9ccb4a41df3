// @herald/sdk: createHerald and its errors, written by hand over the client that `make codegen`
// generates from Herald's OpenAPI document into ./generated (whose functions and types are
// exported too, for what the hand-written layer does not cover).
export {
  createHerald,
  type AudienceCount,
  type DeliveryListOptions,
  type Herald,
  type HeraldOptions,
  type HourlyStatsRange,
  type InstallationListOptions,
  type NotificationListOptions,
  type SendOptions,
  type WaitOptions,
  type WebhookDeliveryListOptions,
} from './herald.ts';
export { HeraldError, HeraldNetworkError, HeraldTimeoutError } from './errors.ts';
export { HeraldWebhookError, verifyWebhook, type VerifyWebhookOptions } from './webhooks.ts';
export type { RetryOptions } from './retry.ts';
export { createClient, type Client, type Config } from './generated/client/index.ts';
export * from './generated/index.ts';
