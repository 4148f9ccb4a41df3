import { Migration } from '@mikro-orm/migrations';

export class Migration20261203090000 extends Migration {

  override name = 'Migration20261203090000';

  override up(): void | Promise<void> {
    // A user's deliveries across notifications (GET /api/v1/deliveries?user_id=), newest first, a
    // page after a cursor: the id in the key gives a page in order, however many the user has. The
    // fanout writes one entry more per delivery; an outcome's update changes none of these columns,
    // so it stays HOT.
    // Built here inside the migrations' transaction (CONCURRENTLY cannot be), which holds up writes
    // to deliveries while it is built: on a large table, build it ahead of the upgrade with CREATE
    // INDEX CONCURRENTLY under this name (docs/OPERATIONS.md, "Upgrading"), and this finds it. A
    // concurrent build that failed leaves an invalid index of that name, which `if not exists`
    // would take for the index: it is dropped, so that the build below makes a valid one.
    this.addSql(`
      do $$ begin
        if exists (select from pg_index i join pg_class c on c.oid = i.indexrelid
                    where c.relname = 'deliveries_application_id_user_id_id_index'
                      and c.relnamespace = current_schema()::regnamespace and not i.indisvalid) then
          drop index "deliveries_application_id_user_id_id_index";
        end if;
      end $$;`);
    this.addSql(`create index if not exists "deliveries_application_id_user_id_id_index" on "deliveries" ("application_id", "user_id", "id");`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index "deliveries_application_id_user_id_id_index";`);
  }

}
