import { Migration } from '@mikro-orm/migrations';

export class Migration20261123120000 extends Migration {

  override name = 'Migration20261123120000';

  override up(): void | Promise<void> {
    // Since when the provider cannot be reached with this credential (network faults; not a verdict on the credential).
    this.addSql(`alter table "provider_credentials" add "unreachable_since" timestamptz null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "provider_credentials" drop column "unreachable_since";`);
  }

}
