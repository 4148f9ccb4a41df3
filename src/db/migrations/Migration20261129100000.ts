import { Migration } from '@mikro-orm/migrations';

export class Migration20261129100000 extends Migration {

  override name = 'Migration20261129100000';

  override up(): void | Promise<void> {
    // Every delivery is inserted pending and updated once with its outcome, which adds a provider
    // message id and two timestamps. At fillfactor 70 a page kept room for only part of its rows'
    // updates: the rest left the page, writing all three indexes again. At 45 the updates of a
    // page's rows fit in it (HOT: no index write), for a larger table. Pages written from now on;
    // older ones keep their room.
    this.addSql(`alter table "deliveries" set (fillfactor = 45);`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "deliveries" set (fillfactor = 70);`);
  }

}
