import { Migration } from '@mikro-orm/migrations';

export class Migration20261127090000 extends Migration {

  override name = 'Migration20261127090000';

  override up(): void | Promise<void> {
    // Localized content: a notification's localizations (null: none), and the one each delivery
    // pushed (null: the default content). Nullable columns without a default: no table rewrite.
    this.addSql(`alter table "notifications" add "localizations" jsonb null;`);
    this.addSql(`alter table "deliveries" add "locale" text null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "deliveries" drop column "locale";`);
    this.addSql(`alter table "notifications" drop column "localizations";`);
  }

}
