// First start of a fresh database: an application to try Herald with, and its two tokens.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.ts';
import { createApplication, createToken, listApplications } from '../domain/applications.ts';
import { allAbilities, clientAbilities } from '../domain/tokens.ts';

export async function ensureDemoApplication(em: EntityManager, config: Config, out: (line?: string) => void) {
  const existing = await listApplications(em);
  const base = `http://localhost:${config.PORT}`;
  if (existing.length > 0) {
    out(`Herald is serving on ${base}. Tokens are shown only when created: \`herald tokens create --app ${existing[0].id} --name ... --abilities '*'\`.`);
    return;
  }
  const application = await createApplication(em, 'Demo');
  const server = await createToken(em, { applicationId: application.id, name: 'demo server', abilities: [allAbilities] });
  const client = await createToken(em, { applicationId: application.id, name: 'demo app', abilities: clientAbilities });
  out();
  out(`Herald is serving on ${base}`);
  out(`Demo application ${application.id}`);
  out(`  server token (all abilities):      ${server.plaintext}`);
  out(`  app token (${clientAbilities.join(' ')}): ${client.plaintext}`);
  out('These tokens are shown once. Try:');
  out(`  curl -s -X PUT ${base}/api/v1/installations/phone-1 -H 'Authorization: Bearer ${client.plaintext}' \\`);
  out(`    -H 'Content-Type: application/json' -d '{"platform":"ios","provider":{"identifier":"a1b2c3"},"user_id":"user-1","permission":"authorized"}'`);
  out(`  curl -s -X POST ${base}/api/v1/notifications -H 'Authorization: Bearer ${server.plaintext}' \\`);
  out(`    -H 'Content-Type: application/json' -d '{"recipients":{"user_ids":["user-1"]},"notification":{"title":"Hello","body":"From Herald"}}'`);
  out();
}
