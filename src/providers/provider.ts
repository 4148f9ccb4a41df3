// The one seam between the fanout and Apple/Google: send a batch, get one outcome per push.
// The fanout never imports a provider library; apns.ts and fcm.ts implement this.
import type { PushOutcome } from '../domain/delivery-rules.ts';
import type { PushContent, PushIds } from '../domain/payloads.ts';

/** What a provider answered for one push: the domain's type, which the deliver rules settle. */
export type { PushOutcome };

export type Push = PushIds & {
  /** The installation's push address: its APNs device token, FCM registration token or Web Push endpoint. */
  providerIdentifier: string;
  /**
   * A web installation's subscription keys, and when the batch read them: a push service's 404 or
   * 410 then invalidates the installation only if its subscription has not changed since.
   */
  subscription?: { p256dh: string; auth: string; readAt: Date };
  content: PushContent;
  /** Absolute expiry (apns-expiration; FCM ttl is derived from it). Null: the provider's default. */
  expiresAt: Date | null;
};

export type SendOptions = {
  /**
   * Each push the provider has not answered by then is given up, as a transient `provider
   * timeout`; the pushes answered keep their outcome. The send resolves by the deadline.
   */
  deadline?: Date;
};

export interface PushProvider {
  send(pushes: Push[], options?: SendOptions): Promise<PushOutcome[]>;
  close(): Promise<void>;
}

/** Where the providers are: the real ones, or local simulators (tests, demo, benchmark). */
export type ProviderEndpoints = {
  /** e.g. `https://127.0.0.1:2197`; unset: api.push.apple.com / api.sandbox.push.apple.com. */
  apns?: string;
  /** e.g. `https://127.0.0.1:2198`; unset: fcm.googleapis.com. */
  fcm?: string;
  /** PEM of a CA to trust for the endpoints above (a simulator's self-signed certificate); Web Push trusts it besides the system's. */
  ca?: string;
  /** HERALD_WEBPUSH_ALLOW_PRIVATE: Web Push may connect to loopback and private addresses (a local simulator). */
  webPushAllowPrivate?: boolean;
  /** The Web Push simulator's URL, when one runs in this process: subscriptions on its host are accepted. */
  webPushSimulator?: string;
};
