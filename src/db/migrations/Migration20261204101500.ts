import { Migration } from '@mikro-orm/migrations';

export class Migration20261204101500 extends Migration {

  override name = 'Migration20261204101500';

  override up(): void | Promise<void> {
    // A throttled notification's pace (`options.throttle_per_minute`, db/sql/throttles.ts): the next
    // free slot of its pushes, shared by every worker. Keyed by `due_at` too, '-infinity' for a
    // notification's one pace, so that pushes due at different instants can each have a pace of
    // their own without a change of key. Goes with its notification (retention deletes those).
    this.addSql(`create table "notification_throttles" (
      "notification_id" uuid not null, "due_at" timestamptz not null default '-infinity', "application_id" uuid not null,
      "next_slot" timestamptz not null,
      constraint "notification_throttles_pkey" primary key ("notification_id", "due_at"));`);
    this.addSql(`alter table "notification_throttles" add constraint "notification_throttles_notification_id_foreign" foreign key ("notification_id") references "notifications" ("id") on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "notification_throttles";`);
  }

}
