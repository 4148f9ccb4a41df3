import { Migration } from '@mikro-orm/migrations';

export class Migration20261204091000 extends Migration {

  override name = 'Migration20261204091000';

  override up(): void | Promise<void> {
    // Sends and their outcomes per application and UTC hour (GET /api/v1/stats/hourly), added to
    // by the statements that move the notifications' counters, each into the slot of its
    // connection (db/sql/statistics.ts: concurrent transactions seldom share a row). A row is
    // updated many times in its hour: room on its page keeps those updates HOT (the key's index is
    // not written again). Hours before the upgrade are not filled in: that would read every
    // delivery at the upgrade.
    this.addSql(`create table "hourly_statistics" (
      "application_id" uuid not null, "hour" timestamptz not null, "slot" smallint not null default 0,
      "sends" integer not null default 0, "accepted" integer not null default 0, "failed" integer not null default 0,
      "skipped" integer not null default 0, "opens" integer not null default 0,
      constraint "hourly_statistics_pkey" primary key ("application_id", "hour", "slot")) with (fillfactor = 50);`);
    this.addSql(`alter table "hourly_statistics" add constraint "hourly_statistics_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);
    // Retention deletes the hours past its horizon, across applications.
    this.addSql(`create index "hourly_statistics_hour_index" on "hourly_statistics" ("hour");`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "hourly_statistics";`);
  }

}
