// verifyWebhook: the receiving side of Herald's webhooks. A request is Herald's when one of the
// `v1` signatures of its `Herald-Signature` header is the HMAC-SHA256, keyed with the endpoint's
// signing secret, of `<t>.<raw body>`, and `t` is recent. Web Crypto (`crypto.subtle`) computes and
// compares it, in constant time: it is in Node 20 and later, browsers, Deno, Bun and edge runtimes,
// so the package stays free of `node:` imports (it is bundled for browsers too).
import type { WebhookEvent } from './generated/index.ts';

/** The request is not one Herald signed with this secret, or not a recent one; `message` says which. */
export class HeraldWebhookError extends Error {
  override readonly name = 'HeraldWebhookError';
}

export type VerifyWebhookOptions = {
  /** How far `t` may be from now, in seconds (default 300): an older request may be a replay. */
  toleranceSeconds?: number;
  /** The time to judge `t` against (default: now). */
  now?: Date;
};

const encoder = new TextEncoder();

function hexBytes(hex: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

/** `t=<unix seconds>,v1=<64 hex digits>[,v1=…]`; other schemes are ignored, as Stripe's are. */
function parseHeader(header: string): { timestamp: number; signatures: string[] } | null {
  let timestamp: number | null = null;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const [name, value = ''] = part.trim().split('=', 2);
    if (name === 't' && /^\d{1,12}$/.test(value)) timestamp = Number(value);
    else if (name === 'v1' && /^[0-9a-fA-F]{64}$/.test(value)) signatures.push(value);
  }
  return timestamp === null || signatures.length === 0 ? null : { timestamp, signatures };
}

/**
 * Checks a webhook request and returns its event. `body` is the raw body exactly as received (a
 * string or the bytes: parsing and re-serializing JSON changes it); `header` is the
 * `Herald-Signature` header; `secret` is the endpoint's signing secret (`whsec_…`). Throws
 * HeraldWebhookError when the header is missing or malformed, `t` is further than
 * `toleranceSeconds` from now, or no signature matches. De-duplicate by the event's `id`: the same
 * event may arrive more than once.
 */
export async function verifyWebhook(
  body: string | Uint8Array,
  header: string | null | undefined,
  secret: string,
  options: VerifyWebhookOptions = {},
): Promise<WebhookEvent> {
  const { toleranceSeconds = 300, now = new Date() } = options;
  if (!header) throw new HeraldWebhookError('The request has no Herald-Signature header.');
  const parsed = parseHeader(header);
  if (!parsed) throw new HeraldWebhookError('The Herald-Signature header is not t=<unix seconds>,v1=<hex HMAC-SHA256>.');
  const age = now.getTime() / 1000 - parsed.timestamp;
  if (Math.abs(age) > toleranceSeconds) {
    const when = age > 0 ? `${Math.round(age)} s ago` : `${Math.round(-age)} s in the future`;
    throw new HeraldWebhookError(`The request was signed ${when}, more than the ${toleranceSeconds} s tolerated.`);
  }
  const raw = typeof body === 'string' ? encoder.encode(body) : body;
  const prefix = encoder.encode(`${parsed.timestamp}.`);
  const signed = new Uint8Array(prefix.length + raw.length);
  signed.set(prefix);
  signed.set(raw, prefix.length);
  const key = await globalThis.crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
  for (const signature of parsed.signatures) {
    // subtle.verify compares in constant time.
    if (await globalThis.crypto.subtle.verify('HMAC', key, hexBytes(signature), signed)) {
      const text = typeof body === 'string' ? body : new TextDecoder().decode(body);
      return JSON.parse(text) as WebhookEvent;
    }
  }
  throw new HeraldWebhookError('No signature of the Herald-Signature header matches this body and secret.');
}
