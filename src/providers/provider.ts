// The one seam between the fanout and Apple/Google: send a batch, get one outcome per push.
// The fanout never imports a provider library; apns.ts and fcm.ts implement this.
import type { PushContent, PushIds } from '../domain/payloads.ts';

export type Push = PushIds & {
  /** The installation's push address: its APNs device token or FCM registration token. */
  providerIdentifier: string;
  content: PushContent;
  /** Absolute expiry (apns-expiration; FCM ttl is derived from it). Null: the provider's default. */
  expiresAt: Date | null;
};

export type PushOutcome =
  | { deliveryId: string; kind: 'accepted'; providerId?: string }
  /** The push address is dead (BadDeviceToken, Unregistered, UNREGISTERED...): fail and invalidate. */
  | { deliveryId: string; kind: 'invalid_token'; reason: string; invalidatedAt?: Date }
  /** This push can never succeed (payload too large, bad collapse id...): fail, keep the device. */
  | { deliveryId: string; kind: 'rejected'; reason: string }
  /** Our credentials are wrong, revoked or not allowed this app (TopicDisallowed): fail with
   * `provider_credentials`, never touch devices. */
  | { deliveryId: string; kind: 'credentials'; reason: string }
  /** Worth another try later (429, 5xx, timeouts); `retryAfterSeconds` from the provider if given. */
  | { deliveryId: string; kind: 'transient'; reason: string; retryAfterSeconds?: number };

export interface PushProvider {
  send(pushes: Push[]): Promise<PushOutcome[]>;
  close(): Promise<void>;
}

/** Where the providers are: the real ones, or local simulators (tests, demo, benchmark). */
export type ProviderEndpoints = {
  /** e.g. `https://127.0.0.1:2197`; unset: api.push.apple.com / api.sandbox.push.apple.com. */
  apns?: string;
  /** e.g. `https://127.0.0.1:2198`; unset: fcm.googleapis.com. */
  fcm?: string;
  /** PEM of a CA to trust for the endpoints above (a simulator's self-signed certificate). */
  ca?: string;
};
