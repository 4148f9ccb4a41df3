// Provider simulators with test identities, pushes, and a raw HTTP/2 client for checking what a
// simulator answers to requests the real client libraries would never send.
import { generateKeyPairSync, randomUUID, sign } from 'node:crypto';
import http2 from 'node:http2';
import { request as httpsRequest } from 'node:https';
import type { PushContent } from '../../src/domain/payloads.ts';
import { createLogger } from '../../src/logging/logger.ts';
import type { Push, PushOutcome } from '../../src/providers/provider.ts';
import type { ApnsCredentials, FcmCredentials } from '../../src/domain/credentials.ts';
import { startApnsSimulator, type ApnsSimulator, type ApnsSimulatorOptions } from '../../src/providers/simulators/apns-simulator.ts';
import { startFcmSimulator, type FcmSimulator, type FcmSimulatorOptions } from '../../src/providers/simulators/fcm-simulator.ts';

export const silentLogger = createLogger('silent');

/** A PushOutcome without its deliveryId, kept per kind (a plain Omit would merge the union). */
export type ExpectedOutcome = PushOutcome extends infer Outcome ? (Outcome extends PushOutcome ? Omit<Outcome, 'deliveryId'> : never) : never;

export function ecKeyPair(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    publicKey: publicKey.export({ type: 'spki', format: 'pem' }) as string,
  };
}

export function rsaKeyPair(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    publicKey: publicKey.export({ type: 'spki', format: 'pem' }) as string,
  };
}

export const apnsTeam = { teamId: 'TEAM123456', keyId: 'KEY1234567', bundleId: 'com.example.herald' };

/** An APNs simulator that knows one signing key, and the credentials that use it. */
export async function apnsSimulator(
  options: Partial<ApnsSimulatorOptions> = {},
): Promise<{ sim: ApnsSimulator; credentials: ApnsCredentials; signingKey: string }> {
  const key = ecKeyPair();
  const sim = await startApnsSimulator({
    teamId: apnsTeam.teamId,
    keys: { [apnsTeam.keyId]: key.publicKey },
    bundleIds: [apnsTeam.bundleId],
    ...options,
  });
  return {
    sim,
    signingKey: key.privateKey,
    credentials: { key: key.privateKey, keyId: apnsTeam.keyId, teamId: apnsTeam.teamId, bundleId: apnsTeam.bundleId, sandbox: true },
  };
}

export const fcmProject = 'herald-test';
export const fcmClientEmail = `herald@${fcmProject}.iam.gserviceaccount.com`;

/** An FCM simulator that knows one service account, and the credentials of that account. */
export async function fcmSimulator(
  options: Partial<FcmSimulatorOptions> = {},
): Promise<{ sim: FcmSimulator; credentials: FcmCredentials }> {
  const key = rsaKeyPair();
  const sim = await startFcmSimulator({ serviceAccounts: { [fcmClientEmail]: key.publicKey }, ...options });
  return {
    sim,
    credentials: {
      serviceAccount: { type: 'service_account', project_id: fcmProject, client_email: fcmClientEmail, private_key: key.privateKey },
    },
  };
}

export function makePush(providerIdentifier: string, content: PushContent = { notification: { title: 'Hello', body: 'World' } }, expiresAt: Date | null = null): Push {
  return { deliveryId: randomUUID(), notificationId: randomUUID(), providerIdentifier, content, expiresAt };
}

/** An APNs provider token (ES256 JWT) as Apple expects it. */
export function apnsJwt(privateKey: string, claims: { iss?: string; iat?: number } = {}, keyId = apnsTeam.keyId): string {
  const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const unsigned = `${encode({ alg: 'ES256', kid: keyId })}.${encode({ iss: apnsTeam.teamId, iat: Math.floor(Date.now() / 1000), ...claims })}`;
  const signature = sign('sha256', Buffer.from(unsigned), { key: privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url');
  return `${unsigned}.${signature}`;
}

export type RawAnswer = { status: number; headers: http2.IncomingHttpHeaders; body: string; json: unknown };

/** One HTTP/2 request with nothing added: what a simulator answers to exactly these headers and body. */
export function h2Request(url: string, ca: string, headers: http2.OutgoingHttpHeaders, body?: string | Buffer): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url, { ca });
    session.on('error', reject);
    const stream = session.request({ ':method': 'POST', ...headers });
    let answerHeaders: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.on('response', (received) => {
      answerHeaders = received;
    });
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => {
      session.close();
      const text = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ status: Number(answerHeaders[':status']), headers: answerHeaders, body: text, json });
    });
    stream.on('error', reject);
    stream.end(body);
  });
}

/** A plain HTTPS (HTTP/1.1) request, as a benchmark or test in another process would make. */
export function httpsCall(url: string, ca: string, method: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const request = httpsRequest(
      url,
      { method, ca, headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: response.statusCode ?? 0, json: text ? JSON.parse(text) : undefined });
        });
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}
