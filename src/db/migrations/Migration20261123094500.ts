import { Migration } from '@mikro-orm/migrations';

export class Migration20261123094500 extends Migration {

  override name = 'Migration20261123094500';

  override up(): void | Promise<void> {
    // How each delivery's push was cut to fit the provider's payload limit; null: sent whole.
    this.addSql(`alter table "deliveries" add "truncation" jsonb null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "deliveries" drop column "truncation";`);
  }

}
