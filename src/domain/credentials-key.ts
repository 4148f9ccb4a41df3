// The key that seals provider credentials (HERALD_CREDENTIALS_KEY, and the new key of `herald
// credentials rotate-key`): exactly 32 bytes, in standard base64 as `openssl rand -base64 32` prints it.

export const credentialsKeyForm = '32 random bytes in base64, 44 characters ending in "=" (`openssl rand -base64 32`)';

/** The key's bytes, or null when the text is not exactly 32 bytes of canonical base64. */
export function decodeCredentialsKey(text: string): Buffer | null {
  // Buffer.from skips characters outside the alphabet, accepts base64url's, and tolerates missing
  // or extra padding: a typo or a cut paste would quietly become another key. Only a text that
  // encodes back to itself is taken.
  const bytes = Buffer.from(text, 'base64');
  return bytes.length === 32 && bytes.toString('base64') === text ? bytes : null;
}
