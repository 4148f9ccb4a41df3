import { Migration } from '@mikro-orm/migrations';

export class Migration20261124120000 extends Migration {

  override name = 'Migration20261124120000';

  override up(): void | Promise<void> {
    // Retention deletes the oldest finished notifications first. A plain index, not a partial one on
    // the finished statuses: that would make every status change a non-HOT update on the send path.
    // Built inside the migrations' transaction (CONCURRENTLY cannot be), so it holds up sends while
    // it is built on a large table: about a second per million notifications.
    this.addSql(`create index "notifications_created_at_index" on "notifications" ("created_at");`);
    // Deleting a notification looks up its key (the ON DELETE CASCADE, and retention): without this
    // index each lookup reads the whole table.
    this.addSql(`create index "idempotency_keys_notification_id_index" on "idempotency_keys" ("notification_id");`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index "notifications_created_at_index";`);
    this.addSql(`drop index "idempotency_keys_notification_id_index";`);
  }

}
