import { Migration } from '@mikro-orm/migrations';

export class Migration20261128090000 extends Migration {

  override name = 'Migration20261128090000';

  override up(): void | Promise<void> {
    // Scheduled sends: when a future `options.send_at` sends it (null: at once). A nullable column
    // without a default: no table rewrite. Cancellation: the `cancelled` status.
    this.addSql(`alter table "notifications" add "scheduled_for" timestamptz null;`);
    this.addSql(`alter table "notifications" drop constraint "notifications_status_check";`);
    this.addSql(`alter table "notifications" add constraint "notifications_status_check" check ("status" in ('queued', 'processing', 'completed', 'partial', 'failed', 'cancelled'));`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "notifications" drop constraint "notifications_status_check";`);
    this.addSql(`alter table "notifications" add constraint "notifications_status_check" check ("status" in ('queued', 'processing', 'completed', 'partial', 'failed'));`);
    this.addSql(`alter table "notifications" drop column "scheduled_for";`);
  }

}
