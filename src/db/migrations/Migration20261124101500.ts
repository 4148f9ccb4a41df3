import { Migration } from '@mikro-orm/migrations';

export class Migration20261124101500 extends Migration {

  override name = 'Migration20261124101500';

  override up(): void | Promise<void> {
    // When each token was last used, to the minute (`herald tokens list`).
    this.addSql(`alter table "api_tokens" add "last_used_at" timestamptz null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "api_tokens" drop column "last_used_at";`);
  }

}
