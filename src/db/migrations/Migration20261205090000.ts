import { Migration } from '@mikro-orm/migrations';

export class Migration20261205090000 extends Migration {

  override name = 'Migration20261205090000';

  override up(): void | Promise<void> {
    // Web Push (1.5.0): platform `web`, whose installations carry their subscription's keys, and
    // the `webpush` credentials (an application's VAPID key pair).
    this.addSql(`alter table "installations" drop constraint "installations_platform_check";`);
    this.addSql(`alter table "installations" add constraint "installations_platform_check" check ("platform" in ('ios', 'android', 'web'));`);
    this.addSql(`alter table "deliveries" drop constraint "deliveries_platform_check";`);
    this.addSql(`alter table "deliveries" add constraint "deliveries_platform_check" check ("platform" in ('ios', 'android', 'web'));`);
    this.addSql(`alter table "provider_credentials" drop constraint "provider_credentials_provider_check";`);
    this.addSql(`alter table "provider_credentials" add constraint "provider_credentials_provider_check" check ("provider" in ('apns', 'fcm', 'webpush'));`);
    // Null for the other platforms. Nullable without a default: no table rewrite.
    this.addSql(`alter table "installations" add column "push_keys" jsonb null;`);
    // The origins whose pages may call the app-token operations from a browser (CORS).
    this.addSql(`alter table "applications" add column "allowed_origins" text[] not null default '{}';`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "applications" drop column "allowed_origins";`);
    this.addSql(`alter table "installations" drop column "push_keys";`);
    this.addSql(`delete from "provider_credentials" where "provider" = 'webpush';`);
    this.addSql(`alter table "provider_credentials" drop constraint "provider_credentials_provider_check";`);
    this.addSql(`alter table "provider_credentials" add constraint "provider_credentials_provider_check" check ("provider" in ('apns', 'fcm'));`);
    this.addSql(`delete from "deliveries" where "platform" = 'web';`);
    this.addSql(`alter table "deliveries" drop constraint "deliveries_platform_check";`);
    this.addSql(`alter table "deliveries" add constraint "deliveries_platform_check" check ("platform" in ('ios', 'android'));`);
    this.addSql(`delete from "installations" where "platform" = 'web';`);
    this.addSql(`alter table "installations" drop constraint "installations_platform_check";`);
    this.addSql(`alter table "installations" add constraint "installations_platform_check" check ("platform" in ('ios', 'android'));`);
  }

}
