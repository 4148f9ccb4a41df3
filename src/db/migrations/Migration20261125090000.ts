import { Migration } from '@mikro-orm/migrations';

export class Migration20261125090000 extends Migration {

  override name = 'Migration20261125090000';

  override up(): void | Promise<void> {
    // A notification's statistics as counters on its row, moved by the statement that moves the
    // delivery rows they count (db/sql/deliveries.ts), so reading them costs the same for 5 or 5,000
    // deliveries. Pending is what the others leave of installations_count.
    this.addSql(`alter table "notifications"
      add column "users_count" int not null default 0,
      add column "installations_count" int not null default 0,
      add column "accepted_count" int not null default 0,
      add column "failed_count" int not null default 0,
      add column "skipped_count" int not null default 0,
      add column "received_count" int not null default 0,
      add column "displayed_count" int not null default 0,
      add column "opened_count" int not null default 0;`);
    // Counted once from the rows that exist; from here on the counters move with them.
    this.addSql(`update "notifications" n set
      "users_count" = c.users, "installations_count" = c.installations, "accepted_count" = c.accepted,
      "failed_count" = c.failed, "skipped_count" = c.skipped, "received_count" = c.received,
      "displayed_count" = c.displayed, "opened_count" = c.opened
      from (select notification_id, count(distinct user_id) as users, count(*) as installations,
                   count(*) filter (where state = 'accepted') as accepted, count(*) filter (where state = 'failed') as failed,
                   count(*) filter (where state = 'skipped') as skipped, count(received_at) as received,
                   count(displayed_at) as displayed, count(opened_at) as opened
              from "deliveries" group by notification_id) c
      where n.id = c.notification_id;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "notifications" drop column "users_count", drop column "installations_count",
      drop column "accepted_count", drop column "failed_count", drop column "skipped_count",
      drop column "received_count", drop column "displayed_count", drop column "opened_count";`);
  }

}
