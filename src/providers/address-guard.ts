// The address check shared by every request Herald makes to a URL someone else chose (webhook
// endpoints, Web Push subscription endpoints): unless private addresses are allowed, a socket
// connects only to an address domain/webhook-addresses.ts allows. Checked by the agents' `lookup`,
// which is what the socket connects to, so a name that resolves to a public address at one moment
// and to a private one the next (DNS rebinding) is judged on the address actually used; a URL whose
// host is an IP address (no lookup happens) is checked before connecting (literalRefusal).
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { refusedAddress } from '../domain/webhook-addresses.ts';

export class AddressRefused extends Error {}

/** A lookup that leaves out the addresses that may not be connected to, and fails when none is left. */
export function guardedLookup(): LookupFunction {
  return ((hostname: string, options: { all?: boolean; family?: number }, callback: (...args: unknown[]) => void) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error);
      const allowed = addresses.filter(({ address }) => refusedAddress(address) === null);
      if (allowed.length === 0) {
        const first = addresses[0];
        return callback(new AddressRefused(`address not allowed: ${hostname} is ${first?.address} (${first ? refusedAddress(first.address) : 'none'})`));
      }
      if (options.all) callback(null, allowed);
      else callback(null, allowed[0].address, allowed[0].family);
    });
  }) as LookupFunction;
}

/** Why a URL whose host is an IP address may not be connected to (`address not allowed: …`); null for a name or an allowed address. */
export function literalRefusal(url: URL): string | null {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const refused = isIP(host) ? refusedAddress(host) : null;
  return refused ? `address not allowed: ${host} is ${refused}` : null;
}
