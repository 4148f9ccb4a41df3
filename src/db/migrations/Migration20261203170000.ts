import { Migration } from '@mikro-orm/migrations';

export class Migration20261203170000 extends Migration {

  override name = 'Migration20261203170000';

  override up(): void | Promise<void> {
    // A broadcast's walk (worker/broadcasts.ts): where it is (the provider identifier of the last
    // group of installations it committed), how many installations it has walked, and when it ended.
    // Nullable or with a constant default: added without rewriting the table.
    this.addSql(`alter table "notifications" add column "walk_after" text null, add column "walked" integer not null default 0, add column "walk_ended_at" timestamptz null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "notifications" drop column "walk_after", drop column "walked", drop column "walk_ended_at";`);
  }

}
