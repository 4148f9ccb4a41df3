import { Migration } from '@mikro-orm/migrations';

export class Migration20261125100000 extends Migration {

  override name = 'Migration20261125100000';

  override up(): void | Promise<void> {
    // A delivery row is written once per push and updated with its outcome: the
    // fanout's cost per delivery is mostly what each row costs Postgres.
    // - No foreign key to applications or notifications: the fanout writes a notification's
    //   deliveries in the transaction that holds its row locked, with its application id, so those
    //   checks (one lookup per row each) could never fail. Retention deletes a notification's
    //   deliveries before the notification itself.
    // - No foreign key to installations either: its check locked every target installation row
    //   (FOR KEY SHARE, a write to the installation's page) for each delivery, and deleting an
    //   installation rewrote all its deliveries (set null). A delivery whose installation row is
    //   gone is already told apart by the join that claims it (`installation_deleted`), and ids are
    //   never reused. The index only that key used goes with it: each was work on every insert.
    this.addSql(`alter table "deliveries" drop constraint "deliveries_application_id_foreign";`);
    this.addSql(`alter table "deliveries" drop constraint "deliveries_notification_id_foreign";`);
    this.addSql(`alter table "deliveries" drop constraint "deliveries_installation_id_foreign";`);
    this.addSql(`drop index "deliveries_installation_id_index";`);
    // - The state index made every outcome a non-HOT update (all four indexes written again). The
    //   deliveries view lists by (notification, id) and filters state within it; an index in that
    //   order serves its pages without sorting a large notification's rows.
    this.addSql(`drop index "deliveries_notification_id_state_index";`);
    this.addSql(`create index "deliveries_notification_id_id_index" on "deliveries" ("notification_id", "id");`);
    // - Room in each page for the two updates of its rows, so that they stay HOT (no index write).
    this.addSql(`alter table "deliveries" set (fillfactor = 70);`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "deliveries" reset (fillfactor);`);
    this.addSql(`drop index "deliveries_notification_id_id_index";`);
    this.addSql(`create index "deliveries_notification_id_state_index" on "deliveries" ("notification_id", "state");`);
    this.addSql(`create index "deliveries_installation_id_index" on "deliveries" ("installation_id");`);
    this.addSql(`alter table "deliveries" add constraint "deliveries_installation_id_foreign" foreign key ("installation_id") references "installations" ("id") on delete set null;`);
    this.addSql(`alter table "deliveries" add constraint "deliveries_notification_id_foreign" foreign key ("notification_id") references "notifications" ("id") on delete cascade;`);
    this.addSql(`alter table "deliveries" add constraint "deliveries_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);
  }

}
