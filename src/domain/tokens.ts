// Application-scoped bearer tokens: `hrld_<public id>_<secret>`. The public id finds the row;
// only a SHA-256 of the secret is stored, compared in constant time.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { forbidden } from './errors.ts';

export const abilities = [
  'notifications:send',
  'notifications:read',
  'installations:write',
  'installations:read',
  // Server side only: with it, an app's extracted token could find any user's installation ids.
  'installations:list',
  // Server side only: with it, a device could tag itself into a segment.
  'installations:tag',
  // Beside notifications:send, for a send to an audience or a segment: a leaked send token must
  // not reach everyone for one unit of quota.
  'notifications:broadcast',
  'segments:write',
  'events:write',
] as const;
export type Ability = (typeof abilities)[number];
export const allAbilities = '*';
/** What a mobile app ships with: it can register itself and report events, never send. */
export const clientAbilities: Ability[] = ['installations:write', 'installations:read', 'events:write'];

const tokenPattern = /^hrld_([0-9a-f]{16})_([0-9a-f]{64})$/;

export type TokenParts = { publicId: string; secret: string };

export function generateToken(): TokenParts & { plaintext: string; secretHash: string } {
  const publicId = randomBytes(8).toString('hex');
  const secret = randomBytes(32).toString('hex');
  return { publicId, secret, plaintext: `hrld_${publicId}_${secret}`, secretHash: hashSecret(secret) };
}

export function parseToken(value: string): TokenParts | null {
  const match = tokenPattern.exec(value);
  return match ? { publicId: match[1], secret: match[2] } : null;
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export function secretMatches(secret: string, storedHash: string): boolean {
  const given = Buffer.from(hashSecret(secret), 'hex');
  const stored = Buffer.from(storedHash, 'hex');
  return given.length === stored.length && timingSafeEqual(given, stored);
}

export function grants(held: readonly string[], required: readonly string[]): boolean {
  return held.includes(allAbilities) || required.every((ability) => held.includes(ability));
}

/**
 * An ability a request turned out to need once its body was read (tags on an installation, an
 * audience on a send): 403 without it, as for an operation's own.
 */
export function demand(held: readonly string[], ability: Ability): void {
  if (!grants(held, [ability])) throw forbidden([ability]);
}

export function isAbility(value: string): value is Ability | typeof allAbilities {
  return value === allAbilities || (abilities as readonly string[]).includes(value);
}
