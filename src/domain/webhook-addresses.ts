// Where a webhook may go: only to the public internet, unless HERALD_WEBHOOK_ALLOW_PRIVATE is set.
// An endpoint URL is chosen by an operator, but a name resolves to whatever its DNS says at the
// moment of sending: without this rule a webhook could be pointed at Herald's own database, the
// cloud's metadata service (169.254.169.254) or anything else on the private network. The rule is
// checked on every address a request connects to (worker/webhook-sender.ts), not once at `add`.
import { BlockList, isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** The ranges refused, by what they are (IANA special-purpose registries, RFC 6890 and later). */
const ranges: [kind: string, subnets: [network: string, prefix: number, family: 'ipv4' | 'ipv6'][]][] = [
  ['unspecified', [['0.0.0.0', 8, 'ipv4'], ['::', 128, 'ipv6']]],
  ['loopback', [['127.0.0.0', 8, 'ipv4'], ['::1', 128, 'ipv6']]],
  ['private', [['10.0.0.0', 8, 'ipv4'], ['172.16.0.0', 12, 'ipv4'], ['192.168.0.0', 16, 'ipv4'], ['fc00::', 7, 'ipv6'], ['fec0::', 10, 'ipv6'], ['64:ff9b:1::', 48, 'ipv6']]],
  ['shared (carrier-grade NAT)', [['100.64.0.0', 10, 'ipv4']]],
  ['link-local', [['169.254.0.0', 16, 'ipv4'], ['fe80::', 10, 'ipv6']]],
  ['multicast', [['224.0.0.0', 4, 'ipv4'], ['ff00::', 8, 'ipv6']]],
  [
    'reserved',
    [
      ['192.0.0.0', 24, 'ipv4'], ['192.0.2.0', 24, 'ipv4'], ['198.18.0.0', 15, 'ipv4'], ['198.51.100.0', 24, 'ipv4'],
      ['203.0.113.0', 24, 'ipv4'], ['240.0.0.0', 4, 'ipv4'], ['100::', 64, 'ipv6'], ['2001:db8::', 32, 'ipv6'],
      // Teredo hides an IPv4 address (obfuscated) that cannot be judged here.
      ['2001::', 32, 'ipv6'],
    ],
  ],
];

// net.BlockList also judges an IPv4-mapped IPv6 address (::ffff:a.b.c.d) by the IPv4 rules.
const lists = ranges.map(([kind, subnets]) => {
  const list = new BlockList();
  for (const [network, prefix, family] of subnets) list.addSubnet(network, prefix, family);
  return { kind, list };
});

/**
 * The IPv4 address an IPv6 address carries, where the network would deliver to it: NAT64
 * (64:ff9b::/96), 6to4 (2002::/16), IPv4-mapped (::ffff:a.b.c.d) and the deprecated
 * IPv4-compatible form (::a.b.c.d, which ipaddr.js reads as IPv4-mapped).
 */
function embeddedIpv4(address: string): string | null {
  const parsed = ipaddr.IPv6.parse(address);
  if (parsed.isIPv4MappedAddress()) return parsed.toIPv4Address().toString();
  const g = parsed.parts;
  const v4 = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return v4(g[6], g[7]);
  if (g[0] === 0x2002) return v4(g[1], g[2]);
  if (g.slice(0, 6).every((x) => x === 0) && (g[6] !== 0 || g[7] > 1)) return v4(g[6], g[7]);
  return null;
}

function kindOf(address: string, family: 'ipv4' | 'ipv6'): string | null {
  return lists.find(({ list }) => list.check(address, family))?.kind ?? null;
}

/** Why a webhook may not connect to this IP address (`loopback`, `private`...), or null when it may. */
export function refusedAddress(address: string): string | null {
  const version = isIP(address.split('%')[0]);
  if (version === 4) return kindOf(address, 'ipv4');
  if (version !== 6) return 'not an IP address';
  const own = kindOf(address, 'ipv6');
  if (own) return own;
  const inner = embeddedIpv4(address);
  const innerKind = inner === null ? null : kindOf(inner, 'ipv4');
  return innerKind === null ? null : `${innerKind} (${inner} inside ${address})`;
}

/** The longest endpoint URL stored. */
export const maxWebhookUrlLength = 2048;

/**
 * What is wrong with an endpoint URL, or null. https only, unless private addresses are allowed
 * (local development: a receiver on this machine); no user name or password (the URL is shown to
 * every token that may list the endpoints); a host that is an IP address must be a public one.
 * A host name is judged when a request is made, on each address it resolves to.
 */
export function webhookUrlProblem(text: string, options: { allowPrivate: boolean }): string | null {
  if (text.length > maxWebhookUrlLength) return `The URL must not be longer than ${maxWebhookUrlLength} characters.`;
  const url = URL.canParse(text) ? new URL(text) : null;
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) return 'The URL must be an absolute https URL.';
  if (url.protocol === 'http:' && !options.allowPrivate) {
    return 'The URL must use https (http is accepted only with HERALD_WEBHOOK_ALLOW_PRIVATE=true, for local development).';
  }
  if (url.username || url.password) return 'The URL must not contain a user name or password: it is shown to every token that lists the endpoints.';
  if (url.hash) return 'The URL must not contain a fragment (#...): it is never sent.';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) && !options.allowPrivate) {
    const refused = refusedAddress(host);
    if (refused) return `The URL's address ${host} is ${refused}: webhooks go only to public addresses (unless HERALD_WEBHOOK_ALLOW_PRIVATE=true).`;
  }
  return null;
}
