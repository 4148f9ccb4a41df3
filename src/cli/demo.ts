// First start of a fresh database: an application to try Herald with, its two tokens, and (with
// the simulators) provider credentials, so that a first notification goes all the way through.
import type { EntityManager } from '@mikro-orm/postgresql';
import { createApplication, createToken, listApplications } from '../domain/applications.ts';
import { setApnsCredentials, setFcmCredentials, setWebPushCredentials } from '../domain/credentials.ts';
import type { WebPushSimulator } from '../providers/simulators/web-push-simulator.ts';
import { allAbilities, clientAbilities } from '../domain/tokens.ts';
import type { SimulatorKeys } from './simulate.ts';

/** `port`: the one the API listens on (PORT=0 picks a free one). */
export async function ensureDemoApplication(
  em: EntityManager,
  port: number,
  out: (line?: string) => void,
  options: { credentialsKey: Buffer | null; simulatorKeys: SimulatorKeys | null; webPush?: WebPushSimulator | null },
) {
  const existing = await listApplications(em);
  const base = `http://localhost:${port}`;
  const providers = options.simulatorKeys ? 'the local APNs, FCM and Web Push simulators' : "Apple's and Google's endpoints, and browsers' push services";
  const reference = `API reference: ${base}/docs`;
  if (existing.length > 0) {
    out(`Herald is serving on ${base}, pushing to ${providers}.`);
    out(reference);
    out(`Dashboard: ${base}/dashboard (sign in with a token that can read notifications and list installations).`);
    out(`Tokens are shown only when created: \`herald tokens create --app ${existing[0].id} --name ... --abilities '*'\`.`);
    return;
  }
  const application = await createApplication(em, 'Demo');
  const server = await createToken(em, { applicationId: application.id, name: 'demo server', abilities: [allAbilities] });
  // The demo's app token may tag its installation, so that audiences can be tried at once; a real
  // app's token is issued without installations:tag (a device must not tag itself into a segment).
  const appAbilities = [...clientAbilities, 'installations:tag'];
  const client = await createToken(em, { applicationId: application.id, name: 'demo app', abilities: appAbilities });
  if (options.simulatorKeys && options.credentialsKey) {
    await setApnsCredentials(em, application.id, options.simulatorKeys.apns, options.credentialsKey);
    await setFcmCredentials(em, application.id, options.simulatorKeys.fcm, options.credentialsKey);
    const { webpush } = options.simulatorKeys;
    await setWebPushCredentials(em, application.id, { subject: webpush.subject, keys: webpush, force: false }, options.credentialsKey);
  }
  const auth = (token: string) => `-H 'Authorization: Bearer ${token}'`;
  out();
  out(`Herald is serving on ${base}, pushing to ${providers}.`);
  out(reference);
  out(`Demo application ${application.id}`);
  out(`  server token (all abilities):  ${server.plaintext}`);
  out(`  app token (${appAbilities.join(' ')}): ${client.plaintext}`);
  out(`Dashboard: ${base}/dashboard (sign in with the server token).`);
  out('These tokens are shown once. Try:');
  out(`  curl -s -X PUT ${base}/api/v1/installations/phone-1 ${auth(client.plaintext)} -H 'Content-Type: application/json' \\`);
  out(`    -d '{"platform":"ios","provider":{"identifier":"a1b2c3d4"},"user_id":"user-1","permission":"authorized"}'`);
  if (options.webPush && options.simulatorKeys) {
    // A subscription the simulator issued: it holds its private key, so it decrypts what arrives.
    const subscription = options.webPush.subscribe(options.simulatorKeys.webpush.publicKey);
    const body = JSON.stringify({ platform: 'web', provider: { identifier: subscription.endpoint, keys: subscription.keys }, user_id: 'user-1', permission: 'authorized' });
    out('  # a browser on the Web Push simulator (it decrypts what it receives: GET /__sim/received on it):');
    out(`  curl -s -X PUT ${base}/api/v1/installations/browser-1 ${auth(client.plaintext)} -H 'Content-Type: application/json' \\`);
    out(`    -d '${body}'`);
  }
  out(`  curl -s -X POST ${base}/api/v1/notifications ${auth(server.plaintext)} -H 'Content-Type: application/json' \\`);
  out(`    -d '{"recipients":{"user_ids":["user-1"]},"notification":{"title":"Hello","body":"From Herald"}}'`);
  out(`  curl -s ${base}/api/v1/notifications/<id from the answer> ${auth(server.plaintext)}`);
  out(`  curl -s '${base}/api/v1/installations?user_id=user-1' ${auth(server.plaintext)}`);
  out();
}
