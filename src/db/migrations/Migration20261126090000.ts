import { Migration } from '@mikro-orm/migrations';

export class Migration20261126090000 extends Migration {

  override name = 'Migration20261126090000';

  override up(): void | Promise<void> {
    // Listing a user's installations goes newest first by id, a page at a time after a cursor, as
    // the notification and delivery lists do on their own (…, id) indexes. With (application_id,
    // user_id) alone, every page reads and sorts all of the user's rows (a shared test account can
    // have thousands); with the id in the key a page reads its own rows, in order. It replaces the
    // old index, whose one use (the fanout's lookup by user) it serves as well. The price: no
    // deduplication of a user's entries, so it is larger. Built inside the migrations' transaction
    // (CONCURRENTLY cannot be), so installation writes wait while it is built.
    this.addSql(`create index "installations_application_id_user_id_id_index" on "installations" ("application_id", "user_id", "id");`);
    this.addSql(`drop index "installations_application_id_user_id_index";`);
  }

  override down(): void | Promise<void> {
    this.addSql(`create index "installations_application_id_user_id_index" on "installations" ("application_id", "user_id");`);
    this.addSql(`drop index "installations_application_id_user_id_id_index";`);
  }

}
