// Web Push rules (RFC 8030, 8291, 8292): which subscription endpoints Herald will POST to, what a
// subscription's keys must be, and how a notification's options become Web Push headers.
import { createHash, createPublicKey } from 'node:crypto';
import { isIP } from 'node:net';
import { refusedAddress } from './webhook-addresses.ts';
import type { FieldErrors } from './errors.ts';

/**
 * The push services of the browsers people use. An endpoint is a URL a page's script chose, and
 * Herald POSTs to it: only these hosts (and those an operator adds) are accepted, so that an app
 * token in public JavaScript cannot make Herald send requests anywhere else.
 */
export const knownPushServiceHosts = [
  // Chrome, and Chromium browsers (Edge, Opera, Brave...).
  'fcm.googleapis.com',
  'android.googleapis.com',
  // Firefox.
  'updates.push.services.mozilla.com',
  'push.services.mozilla.com',
  // Safari.
  'web.push.apple.com',
  // Windows (WNS): one host per region, under this domain.
  '*.notify.windows.com',
] as const;

export type EndpointRules = {
  /** Hosts an operator adds (HERALD_WEBPUSH_HOSTS): `host`, `host:port` or `*.domain`. */
  extraHosts: readonly string[];
  /** HERALD_WEBPUSH_ALLOW_PRIVATE: loopback and private addresses allowed (a local simulator). */
  allowPrivate: boolean;
};

/** Whether `url`'s host is one of `patterns` (`host`, `host:port`, or `*.domain` for its subdomains). */
function hostListed(url: URL, patterns: readonly string[]): boolean {
  const hostname = url.hostname.toLowerCase();
  return patterns.some((entry) => {
    const pattern = entry.trim().toLowerCase();
    if (pattern.startsWith('*.')) return hostname.endsWith(pattern.slice(1)) && hostname.length > pattern.length - 1;
    // `host:port` or `[v6]:port` names one port; a bare host (an IPv6 address in brackets) any.
    return /^(\[[^\]]+\]|[^:]+):\d+$/.test(pattern) ? url.host.toLowerCase() === pattern : hostname === pattern;
  });
}

/** What is wrong with a subscription endpoint, or null. */
export function webPushEndpointProblem(text: string, rules: EndpointRules): string | null {
  const url = URL.canParse(text) ? new URL(text) : null;
  if (!url || url.protocol !== 'https:') return 'The identifier must be an absolute https URL: the endpoint of a Web Push subscription.';
  if (url.username || url.password) return 'The endpoint must not contain a user name or password.';
  if (url.hash) return 'The endpoint must not contain a fragment (#...).';
  if (!hostListed(url, knownPushServiceHosts) && !hostListed(url, rules.extraHosts)) {
    return `The endpoint's host ${url.hostname} is not a known push service (${knownPushServiceHosts.join(', ')}), nor one this Herald is configured to allow (HERALD_WEBPUSH_HOSTS).`;
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) && !rules.allowPrivate) {
    const refused = refusedAddress(host);
    if (refused) return `The endpoint's address ${host} is ${refused}: pushes go only to public addresses (unless HERALD_WEBPUSH_ALLOW_PRIVATE=true).`;
  }
  return null;
}

/** Bytes of a P-256 public key uncompressed (0x04, x, y) and of an auth secret (RFC 8291 §3). */
const p256dhBytes = 65;
const authBytes = 16;
const base64url = /^[A-Za-z0-9_-]+={0,2}$/;

function decodeBase64url(text: string): Buffer | null {
  return base64url.test(text) ? Buffer.from(text.replace(/=+$/, ''), 'base64url') : null;
}

/** Whether these bytes are an uncompressed point on P-256 (OpenSSL checks the curve equation). */
function isP256Point(bytes: Buffer): boolean {
  if (bytes.length !== p256dhBytes || bytes[0] !== 0x04) return false;
  try {
    createPublicKey({
      key: { kty: 'EC', crv: 'P-256', x: bytes.subarray(1, 33).toString('base64url'), y: bytes.subarray(33).toString('base64url') },
      format: 'jwk',
    });
    return true;
  } catch {
    return false;
  }
}

export type SubscriptionKeys = { p256dh: string; auth: string };

/** Field errors of a subscription's keys, keyed as the document names them. */
export function subscriptionKeyProblems(keys: SubscriptionKeys): FieldErrors {
  const errors: FieldErrors = {};
  const p256dh = decodeBase64url(keys.p256dh);
  if (!p256dh || !isP256Point(p256dh)) {
    errors['provider.keys.p256dh'] = [`The p256dh key must be base64url of a ${p256dhBytes}-byte uncompressed P-256 public key.`];
  }
  const auth = decodeBase64url(keys.auth);
  if (!auth || auth.length !== authBytes) errors['provider.keys.auth'] = [`The auth key must be base64url of ${authBytes} bytes.`];
  return errors;
}

/**
 * The `Topic` header for a collapse id: RFC 8030 §5.4 allows at most 32 characters of the base64url
 * alphabet. An id that already is one is kept, so a topic seen in a push service's logs reads as
 * the id; any other becomes the first 32 characters of its SHA-256 in base64url, the same for the
 * same id, with 192 bits left to keep two ids apart.
 */
export function webPushTopic(collapseId: string): string {
  if (/^[A-Za-z0-9_-]{1,32}$/.test(collapseId)) return collapseId;
  return createHash('sha256').update(collapseId, 'utf8').digest('base64url').slice(0, 32);
}

/**
 * The most plaintext bytes a push carries: RFC 8291 §4 allows one 4,096-byte record, of which the
 * aes128gcm header takes 86 (salt 16, record size 4, key id length 1, key id 65), the padding
 * delimiter 1 and the AES-GCM tag 16.
 */
export const webPushPlaintextLimit = 4096 - 86 - 1 - 16;

/** `Urgency` (RFC 8030 §5.3) for a notification's priority. */
export function webPushUrgency(priority: 'normal' | 'high' | undefined): 'normal' | 'high' {
  return priority === 'high' ? 'high' : 'normal';
}

/**
 * What is wrong with an origin an operator allows to call Herald from a browser, or null. An
 * origin is a scheme, host and port, nothing else (`https://shop.example`); http only for this
 * machine (a page in development), since a page served over http can be rewritten by anyone on
 * its path and its token taken.
 */
export function allowedOriginProblem(text: string): string | null {
  const url = URL.canParse(text) ? new URL(text) : null;
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:') || url.origin !== text) {
    return `${JSON.stringify(text)} is not an origin: give the scheme, host and port a page is served from, e.g. https://shop.example (no path, no trailing slash).`;
  }
  if (url.protocol === 'http:' && !['localhost', '127.0.0.1', '[::1]'].includes(url.hostname)) {
    return `${text} is http: only pages on this machine (localhost, 127.0.0.1, [::1]) may use http; allow the site's https origin.`;
  }
  return null;
}
