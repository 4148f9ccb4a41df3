// The part of http_ece (Encrypted Content-Encoding, RFC 8188, by its author) the Web Push simulator
// uses: the package ships no types.
declare module 'http_ece' {
  import type { ECDH } from 'node:crypto';

  type Params = { version: 'aes128gcm' | 'aesgcm' | 'aesgcm128'; privateKey?: ECDH; authSecret?: string; dh?: string; salt?: string; keyid?: string; key?: string; rs?: number };
  const ece: { decrypt(buffer: Buffer, params: Params): Buffer; encrypt(buffer: Buffer, params: Params): Buffer };
  export default ece;
}
