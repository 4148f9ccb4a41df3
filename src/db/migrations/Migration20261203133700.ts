import { Migration } from '@mikro-orm/migrations';

export class Migration20261203133700 extends Migration {

  override name = 'Migration20261203133700';

  override up(): void | Promise<void> {
    // A cancelled notification has its own webhook event (document 1.2.0) instead of a
    // `notification.completed` with status `cancelled`.
    this.addSql(`alter table "webhook_events" drop constraint "webhook_events_type_check";`);
    this.addSql(`alter table "webhook_events" add constraint "webhook_events_type_check" check ("type" in ('notification.completed', 'notification.cancelled', 'delivery.failed', 'installation.invalidated', 'event.reported'));`);
  }

  override down(): void | Promise<void> {
    this.addSql(`delete from "webhook_events" where "type" = 'notification.cancelled';`);
    this.addSql(`update "webhook_endpoints" set "events" = array_remove("events", 'notification.cancelled');`);
    this.addSql(`alter table "webhook_events" drop constraint "webhook_events_type_check";`);
    this.addSql(`alter table "webhook_events" add constraint "webhook_events_type_check" check ("type" in ('notification.completed', 'delivery.failed', 'installation.invalidated', 'event.reported'));`);
  }

}
