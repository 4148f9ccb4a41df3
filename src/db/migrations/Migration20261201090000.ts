import { Migration } from '@mikro-orm/migrations';

export class Migration20261201090000 extends Migration {

  override name = 'Migration20261201090000';

  override up(): void | Promise<void> {
    // When a provider first accepted a push made with these credentials; null: none has yet, and
    // health says `unverified`, not `healthy`. Credentials that already have an accepted push
    // since they were last set keep `healthy`: one pass over the deliveries finds them.
    this.addSql(`alter table "provider_credentials" add "verified_at" timestamptz null;`);
    this.addSql(`
      update "provider_credentials" c set "verified_at" = a.last_accepted
        from (select application_id, platform, max(completed_at) as last_accepted
                from deliveries where state = 'accepted' group by application_id, platform) a
       where a.application_id = c.application_id
         and a.platform = case c.provider when 'apns' then 'ios' else 'android' end
         and a.last_accepted >= c.updated_at;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "provider_credentials" drop column "verified_at";`);
  }

}
