import { Migration } from '@mikro-orm/migrations';

export class Migration20261122013138 extends Migration {

  override name = 'Migration20261122013138';

  override up(): void | Promise<void> {
    this.addSql(`create table "provider_credentials" ("id" uuid not null, "application_id" uuid not null, "provider" text not null, "settings" jsonb not null, "secret" text not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, "unhealthy_since" timestamptz null, "last_error" text null, primary key ("id"));`);
    this.addSql(`alter table "provider_credentials" add constraint "provider_credentials_application_id_provider_unique" unique ("application_id", "provider");`);

    this.addSql(`alter table "applications" add "send_quota" int null, add "send_window_seconds" int null;`);

    this.addSql(`alter table "deliveries" add "provider_message_id" text null, add "last_attempt_at" timestamptz null;`);

    // rate-limiter-flexible's Postgres store (its own layout): send counters per application and window.
    this.addSql(`create table "rate_limits" ("key" varchar(255) primary key, "points" integer not null default 0, "expire" bigint);`);

    this.addSql(`alter table "provider_credentials" add constraint "provider_credentials_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);
    this.addSql(`alter table "provider_credentials" add constraint "provider_credentials_provider_check" check ("provider" in ('apns', 'fcm'));`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "provider_credentials" cascade;`);
    this.addSql(`drop table if exists "rate_limits";`);

    this.addSql(`alter table "applications" drop column "send_quota", drop column "send_window_seconds";`);

    this.addSql(`alter table "deliveries" drop column "provider_message_id", drop column "last_attempt_at";`);
  }

}
