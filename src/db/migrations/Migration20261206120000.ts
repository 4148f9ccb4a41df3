import { Migration } from '@mikro-orm/migrations';

export class Migration20261206120000 extends Migration {

  override name = 'Migration20261206120000';

  override up(): void | Promise<void> {
    // A broadcast's progress (1.5.0): the installations its walk has to read, counted when the walk
    // starts (null until then and for any other send), and each local-time wave's, counted when the
    // waves are planned. Both are what `walked` counts up to. Added without a table rewrite.
    this.addSql(`alter table "notifications" add column "audience_installations" integer null;`);
    this.addSql(`alter table "broadcast_waves" add column "installations" integer not null default 0;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "broadcast_waves" drop column "installations";`);
    this.addSql(`alter table "notifications" drop column "audience_installations";`);
  }

}
