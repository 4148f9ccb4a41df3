import { Migration } from '@mikro-orm/migrations';

export class Migration20261204090000 extends Migration {

  override name = 'Migration20261204090000';

  override up(): void | Promise<void> {
    // A test send's installation ids (recipients.installation_ids); null for every other send.
    // Nullable without a default: added without rewriting the table.
    this.addSql(`alter table "notifications" add column "installation_ids" text[] null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "notifications" drop column "installation_ids";`);
  }

}
