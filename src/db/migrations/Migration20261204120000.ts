import { Migration } from '@mikro-orm/migrations';

export class Migration20261204120000 extends Migration {

  override name = 'Migration20261204120000';

  override up(): void | Promise<void> {
    // Delivery at each device's local time (`options.local_time`): when a delivery is due, null
    // when at the send's start. Nullable without a default: no table rewrite. No index: the
    // deliver jobs are deferred to it, and an index would be one more entry to write per push.
    this.addSql(`alter table "deliveries" add column "scheduled_for" timestamptz null;`);
    // A local-time broadcast's waves (worker/broadcasts.ts): one per instant its installations are
    // due, covering the device time zones due then, each walked with its own checkpoint. Deleted
    // with their notification (retention).
    this.addSql(`create table "broadcast_waves" (
      "notification_id" uuid not null, "due_at" timestamptz not null, "application_id" uuid not null,
      "timezones" text[] not null, "covers_null" boolean not null, "job_id" uuid not null,
      "walk_after" text null, "walked" integer not null default 0, "ended_at" timestamptz null,
      constraint "broadcast_waves_pkey" primary key ("notification_id", "due_at"),
      constraint "broadcast_waves_notification_id_foreign" foreign key ("notification_id") references "notifications" ("id") on delete cascade);`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table "broadcast_waves";`);
    this.addSql(`alter table "deliveries" drop column "scheduled_for";`);
  }

}
