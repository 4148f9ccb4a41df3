import { Migration } from '@mikro-orm/migrations';

export class Migration20261129090000 extends Migration {

  override name = 'Migration20261129090000';

  override up(): void | Promise<void> {
    // Retention counts from a notification's end (completed_at), not its creation: a send may be
    // scheduled any time ahead, and cancelled notifications end too. completed_at is written once,
    // when the notification ends, so only that update stops being HOT. The created_at index served
    // retention alone. Built inside the migrations' transaction, like the index it replaces: about a
    // second per million notifications, during which sends wait.
    this.addSql(`create index "notifications_completed_at_index" on "notifications" ("completed_at");`);
    this.addSql(`drop index "notifications_created_at_index";`);
  }

  override down(): void | Promise<void> {
    this.addSql(`create index "notifications_created_at_index" on "notifications" ("created_at");`);
    this.addSql(`drop index "notifications_completed_at_index";`);
  }

}
