// A generated VAPID key pair is one pair: the private key, base64url of its 32 bytes, gives the
// public key back, also for the keys whose scalar starts with a zero byte (one in 256).
import { createECDH } from 'node:crypto';
import { generateVapidKeys } from '../../src/domain/credentials.ts';

test('every generated private key is 32 bytes whose public key is the one generated with it', () => {
  let leadingZero = 0;
  // 3,000 pairs: a scalar with a leading zero byte comes up with a probability of 1 - (255/256)^3000.
  for (let index = 0; index < 3_000; index++) {
    const { publicKey, privateKey } = generateVapidKeys();
    const bytes = Buffer.from(privateKey, 'base64url');
    expect(bytes).toHaveLength(32);
    if (bytes[0] === 0) leadingZero += 1;
    const ecdh = createECDH('prime256v1');
    ecdh.setPrivateKey(bytes);
    expect(ecdh.getPublicKey().toString('base64url')).toBe(publicKey);
  }
  expect(leadingZero).toBeGreaterThan(0);
});
