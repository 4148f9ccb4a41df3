// createHerald: one method per operation of the API over the generated client, which throw
// HeraldError or HeraldNetworkError instead of returning `{ data, error }`, retry what is safe to
// retry, walk the paginated lists, and wait for a notification's fanout to end.
import { HeraldTimeoutError } from './errors.ts';
import { createClient, type Client } from './generated/client/index.ts';
import {
  countAudience,
  deleteInstallation,
  deleteSegment,
  getApp,
  getSegment,
  hourlyStats,
  listSegments,
  listTags,
  putSegment,
  getInstallation,
  cancelNotification,
  getNotification,
  getNotificationBreakdown,
  listDeliveries,
  listInstallations,
  listNotifications,
  listUserDeliveries,
  listWebhookDeliveries,
  listWebhooks,
  registerInstallation,
  reportEvent,
  sendNotification,
  updateInstallation,
  type Application,
  type Audience,
  type AudienceCountEnvelope,
  type AudienceCountRequest,
  type Delivery,
  type DeliveryBreakdown,
  type DeliveryPage,
  type Event,
  type EventCreate,
  type HourStats,
  type Installation,
  type InstallationPage,
  type InstallationPatch,
  type InstallationPut,
  type ListDeliveriesData,
  type ListInstallationsData,
  type ListNotificationsData,
  type ListUserDeliveriesData,
  type ListWebhookDeliveriesData,
  type Notification,
  type NotificationAccepted,
  type NotificationPage,
  type NotificationSend,
  type Segment,
  type TagSummary,
  type UserDelivery,
  type UserDeliveryPage,
  type WebhookDelivery,
  type WebhookDeliveryPage,
  type WebhookEndpoint,
} from './generated/index.ts';
import { retryPolicy, withRetries, type Outcome, type RetryOptions } from './retry.ts';

export type HeraldOptions = {
  /** Where Herald answers, without `/api/v1`: `https://push.example.com`. */
  baseUrl: string;
  /** A bearer token, `hrld_…`, from `herald tokens create`. */
  token: string;
  /** A fetch to use instead of the global one (a proxy, instrumentation). */
  fetch?: typeof globalThis.fetch;
  /** Retries of 429, 503 and network errors (see RetryOptions for the defaults); `false`: none. */
  retry?: RetryOptions | false;
  /** Each attempt's time limit, in ms (default 30,000); past it the attempt is a network error. */
  timeoutMs?: number;
};

// A list's query parameters as the document names them (`user_id`), camel-cased (`userId`): the
// filters a list has come from the generated types, so a filter added to the document is here too.
type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : S;
type CamelKeys<T> = { [K in keyof T as CamelCase<K & string>]: T[K] };

/**
 * A list's filters and paging: `limit` is the page size, `cursor` a previous page's
 * `meta.next_cursor` (the iterators take no cursor: they follow them all).
 */
export type InstallationListOptions = CamelKeys<ListInstallationsData['query']>;
export type NotificationListOptions = CamelKeys<NonNullable<ListNotificationsData['query']>>;
export type DeliveryListOptions = CamelKeys<NonNullable<ListDeliveriesData['query']>>;
export type UserDeliveryListOptions = CamelKeys<ListUserDeliveriesData['query']>;
export type WebhookDeliveryListOptions = CamelKeys<NonNullable<ListWebhookDeliveriesData['query']>>;

export type SendOptions = {
  /** Makes the send safe to repeat: the same key and body return the first notification. Default: a random UUID. */
  idempotencyKey?: string;
};
export type WaitOptions = {
  /** Give up (HeraldTimeoutError) after this long, in ms (default 60,000). */
  timeoutMs?: number;
  /** Time between two reads of the notification, in ms (default 1,000). */
  intervalMs?: number;
};

export type Herald = {
  /** The generated client this one calls through, for the operations it has no method for (health, readiness). */
  readonly client: Client;
  /** Creates (201) or replaces (200) an installation: PUT /api/v1/installations/{installationId}. */
  registerInstallation(installationId: string, body: InstallationPut): Promise<Installation>;
  /** Changes an installation's user, permission or tags (merged: null removes one): PATCH /api/v1/installations/{installationId}. */
  updateInstallation(installationId: string, body: InstallationPatch): Promise<Installation>;
  getInstallation(installationId: string): Promise<Installation>;
  deleteInstallation(installationId: string): Promise<void>;
  /** One page of a user's installations, newest registration first. */
  listInstallations(options: InstallationListOptions): Promise<InstallationPage>;
  /** Every installation of a user, fetching the pages as the loop reaches them. */
  installations(options: Omit<InstallationListOptions, 'cursor'>): AsyncGenerator<Installation, void, undefined>;
  /**
   * Queues a notification (202); `meta.accepted` is false when an Idempotency-Key replay returned the
   * first one. `recipients` is one of `user_ids`, `audience`, `segment` or `installation_ids` (a
   * test send to up to 100 of the application's own installations).
   */
  send(body: NotificationSend, options?: SendOptions): Promise<NotificationAccepted>;
  getNotification(notificationId: string): Promise<Notification>;
  /**
   * Cancels a queued (or scheduled) or processing notification: once this returns, none of its pushes
   * leaves Herald. Cancelling it again returns it again; one that has already ended is a 409 HeraldError.
   */
  cancelNotification(notificationId: string): Promise<Notification>;
  /** One page of the application's notifications, newest first. */
  listNotifications(options?: NotificationListOptions): Promise<NotificationPage>;
  /** Every notification of the application, newest first, fetching the pages as the loop reaches them. */
  notifications(options?: Omit<NotificationListOptions, 'cursor'>): AsyncGenerator<Notification, void, undefined>;
  /** A notification's deliveries counted by state, platform and reason (why `failed` and `skipped` are what they are). */
  getNotificationBreakdown(notificationId: string): Promise<DeliveryBreakdown['data']>;
  /** One page of a notification's deliveries, in fanout order. */
  listDeliveries(notificationId: string, options?: DeliveryListOptions): Promise<DeliveryPage>;
  /** Every delivery of a notification, fetching the pages as the loop reaches them. */
  deliveries(notificationId: string, options?: Omit<DeliveryListOptions, 'cursor'>): AsyncGenerator<Delivery, void, undefined>;
  /** One page of a user's deliveries across notifications, newest first, each with its notification's id and title. */
  listUserDeliveries(options: UserDeliveryListOptions): Promise<UserDeliveryPage>;
  /** Every delivery to a user, newest first, fetching the pages as the loop reaches them. */
  userDeliveries(options: Omit<UserDeliveryListOptions, 'cursor'>): AsyncGenerator<UserDelivery, void, undefined>;
  /** Records a delivery event; idempotent by `event_id`. */
  reportEvent(body: EventCreate): Promise<Event>;
  /** The token's application: abilities, send policy, credentials health. */
  getApp(): Promise<Application>;
  /** The application's webhook endpoints (never their secrets), enabled or disabled, with their last attempt. */
  listWebhooks(): Promise<WebhookEndpoint[]>;
  /** One page of an endpoint's delivery log, newest event first. */
  listWebhookDeliveries(webhookId: string, options?: WebhookDeliveryListOptions): Promise<WebhookDeliveryPage>;
  /** Every delivery of an endpoint's log, fetching the pages as the loop reaches them. */
  webhookDeliveries(webhookId: string, options?: Omit<WebhookDeliveryListOptions, 'cursor'>): AsyncGenerator<WebhookDelivery, void, undefined>;
  /** Reads the notification until its status is final (completed, partial, failed or cancelled) and returns it. */
  waitForCompletion(notificationId: string, options?: WaitOptions): Promise<Notification>;
  /** Creates or replaces a segment, a named audience a send can name (`recipients: { segment }`). */
  putSegment(name: string, audience: Audience): Promise<Segment>;
  getSegment(name: string): Promise<Segment>;
  /** The application's segments, by name. */
  listSegments(): Promise<Segment[]>;
  deleteSegment(name: string): Promise<void>;
  /** How many installations and users a visible push to the audience (or the segment) would reach now. */
  countAudience(target: AudienceCountRequest): Promise<AudienceCount>;
  /**
   * The application's tag keys with their most common values, from the summary Herald keeps
   * (`refreshed_at` says when it was computed; null until the first one is).
   */
  listTags(): Promise<TagSummary>;
  /**
   * Sends, accepted, failed, skipped and opens per UTC hour, every hour from the one holding `from`
   * up to `to` (default: the 24 hours before now; at most 31 days).
   */
  hourlyStats(range?: HourlyStatsRange): Promise<HourStats[]>;
};

/** What `countAudience` answers. */
export type AudienceCount = AudienceCountEnvelope['data'];

/** The range of `hourlyStats`: date-times as RFC 3339 strings or Dates. */
export type HourlyStatsRange = { from?: string | Date; to?: string | Date };

// The notification statuses after which nothing changes any more.
const finalStatuses: ReadonlySet<Notification['status']> = new Set(['completed', 'partial', 'failed', 'cancelled']);

type Page<T> = { data: T[]; meta: { next_cursor: string | null } };

async function* everyItem<T>(page: (cursor: string | undefined) => Promise<Page<T>>): AsyncGenerator<T, void, undefined> {
  let cursor: string | undefined;
  do {
    const { data, meta } = await page(cursor);
    yield* data;
    cursor = meta.next_cursor ?? undefined;
  } while (cursor !== undefined);
}

// `userId` → `user_id`: a list's options back to the document's query parameters.
function snakeKeys<T extends object>(options: T): Record<string, unknown> {
  return Object.fromEntries(Object.entries(options).map(([key, value]) => [key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), value]));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function createHerald(options: HeraldOptions): Herald {
  // Checked here so that a wrong base URL fails at once, not as a network error on the first call.
  const url = URL.canParse(options.baseUrl) ? new URL(options.baseUrl) : null;
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:') {
    throw new TypeError(`baseUrl must be an http or https URL, such as https://push.example.com: got ${options.baseUrl}`);
  }
  const baseUrl = url.href.replace(/\/+$/, '');
  const client = createClient({ baseUrl, auth: options.token, fetch: options.fetch });
  const policy = retryPolicy(options.retry, options.timeoutMs);
  // GET, PUT and DELETE are idempotent (RFC 9110), and so are an event (by event_id) and a send with
  // an Idempotency-Key (every send made here has one); a PATCH is not, so it is not repeated after
  // a network error left its outcome unknown.
  const idempotent = <T>(attempt: (signal: AbortSignal) => Promise<Outcome<T>>) => withRetries(policy, true, attempt);
  const once = <T>(attempt: (signal: AbortSignal) => Promise<Outcome<T>>) => withRetries(policy, false, attempt);

  const herald: Herald = {
    client,
    async registerInstallation(installationId, body) {
      const { data } = await idempotent((signal) => registerInstallation({ client, signal, path: { installationId }, body }));
      return data;
    },
    async updateInstallation(installationId, body) {
      const { data } = await once((signal) => updateInstallation({ client, signal, path: { installationId }, body }));
      return data;
    },
    async getInstallation(installationId) {
      const { data } = await idempotent((signal) => getInstallation({ client, signal, path: { installationId } }));
      return data;
    },
    async deleteInstallation(installationId) {
      await idempotent((signal) => deleteInstallation({ client, signal, path: { installationId } }));
    },
    listInstallations(options) {
      const query = snakeKeys(options) as ListInstallationsData['query'];
      return idempotent((signal) => listInstallations({ client, signal, query }));
    },
    installations(options) {
      return everyItem((cursor) => herald.listInstallations({ ...options, cursor }));
    },
    send(body, { idempotencyKey = globalThis.crypto.randomUUID() } = {}) {
      return idempotent((signal) => sendNotification({ client, signal, body, headers: { 'Idempotency-Key': idempotencyKey } }));
    },
    async getNotification(notificationId) {
      const { data } = await idempotent((signal) => getNotification({ client, signal, path: { notificationId } }));
      return data;
    },
    async cancelNotification(notificationId) {
      // Cancelling twice is answered like once: safe to repeat after a network error.
      const { data } = await idempotent((signal) => cancelNotification({ client, signal, path: { notificationId } }));
      return data;
    },
    listNotifications(options = {}) {
      const query = snakeKeys(options) as ListNotificationsData['query'];
      return idempotent((signal) => listNotifications({ client, signal, query }));
    },
    notifications(options = {}) {
      return everyItem((cursor) => herald.listNotifications({ ...options, cursor }));
    },
    async getNotificationBreakdown(notificationId) {
      const { data } = await idempotent((signal) => getNotificationBreakdown({ client, signal, path: { notificationId } }));
      return data;
    },
    listDeliveries(notificationId, options = {}) {
      const query = snakeKeys(options) as ListDeliveriesData['query'];
      return idempotent((signal) => listDeliveries({ client, signal, path: { notificationId }, query }));
    },
    deliveries(notificationId, options = {}) {
      return everyItem((cursor) => herald.listDeliveries(notificationId, { ...options, cursor }));
    },
    listUserDeliveries(options) {
      const query = snakeKeys(options) as ListUserDeliveriesData['query'];
      return idempotent((signal) => listUserDeliveries({ client, signal, query }));
    },
    userDeliveries(options) {
      return everyItem((cursor) => herald.listUserDeliveries({ ...options, cursor }));
    },
    async reportEvent(body) {
      const { data } = await idempotent((signal) => reportEvent({ client, signal, body }));
      return data;
    },
    async getApp() {
      const { data } = await idempotent((signal) => getApp({ client, signal }));
      return data;
    },
    async listWebhooks() {
      const { data } = await idempotent((signal) => listWebhooks({ client, signal }));
      return data;
    },
    listWebhookDeliveries(webhookId, options = {}) {
      const query = snakeKeys(options) as ListWebhookDeliveriesData['query'];
      return idempotent((signal) => listWebhookDeliveries({ client, signal, path: { webhookId }, query }));
    },
    webhookDeliveries(webhookId, options = {}) {
      return everyItem((cursor) => herald.listWebhookDeliveries(webhookId, { ...options, cursor }));
    },
    async putSegment(name, audience) {
      const { data } = await idempotent((signal) => putSegment({ client, signal, path: { name }, body: { audience } }));
      return data;
    },
    async getSegment(name) {
      const { data } = await idempotent((signal) => getSegment({ client, signal, path: { name } }));
      return data;
    },
    async listSegments() {
      const { data } = await idempotent((signal) => listSegments({ client, signal }));
      return data;
    },
    async deleteSegment(name) {
      await idempotent((signal) => deleteSegment({ client, signal, path: { name } }));
    },
    async countAudience(target) {
      // A count changes nothing: safe to repeat.
      const { data } = await idempotent((signal) => countAudience({ client, signal, body: target }));
      return data;
    },
    listTags() {
      return idempotent((signal) => listTags({ client, signal }));
    },
    async hourlyStats({ from, to } = {}) {
      const dateTime = (value: string | Date | undefined) => (value instanceof Date ? value.toISOString() : value);
      const query = { from: dateTime(from), to: dateTime(to) };
      const { data } = await idempotent((signal) => hourlyStats({ client, signal, query }));
      return data;
    },
    async waitForCompletion(notificationId, { timeoutMs = 60_000, intervalMs = 1_000 } = {}) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const notification = await herald.getNotification(notificationId);
        if (finalStatuses.has(notification.status)) return notification;
        const leftMs = deadline - Date.now();
        if (leftMs <= 0) {
          throw new HeraldTimeoutError(`Notification ${notificationId} is still ${notification.status} after ${timeoutMs} ms.`, notification);
        }
        await sleep(Math.min(intervalMs, leftMs));
      }
    },
  };
  return herald;
}
