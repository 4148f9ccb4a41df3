import { Migration } from '@mikro-orm/migrations';

export class Migration20261203160000 extends Migration {

  override name = 'Migration20261203160000';

  override up(): void | Promise<void> {
    // Audiences (document 1.3.0). A constant default adds the column without rewriting the table.
    this.addSql(`alter table "installations" add column "tags" jsonb not null default '{}';`);
    // An audience's tag conditions (`eq`, `in`, `exists`) are containment and key tests, which a
    // GIN index answers without reading the rows that do not match (db/sql/audiences.ts). The
    // default operator class, not jsonb_path_ops: that one cannot answer `?` (a key exists).
    // Every row holds `{}` when this runs, so the build has next to nothing to index.
    this.addSql(`create index "installations_tags_index" on "installations" using gin ("tags");`);

    this.addSql(`create table "segments" (
      "id" uuid not null, "application_id" uuid not null, "name" text not null, "audience" jsonb not null,
      "created_at" timestamptz not null, "updated_at" timestamptz not null,
      constraint "segments_pkey" primary key ("id"));`);
    this.addSql(`alter table "segments" add constraint "segments_application_id_name_unique" unique ("application_id", "name");`);
    this.addSql(`alter table "segments" add constraint "segments_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);

    // A send's audience (its own, or its segment's as it was when sent), and its segment's name.
    this.addSql(`alter table "notifications" add column "audience" jsonb null, add column "segment" text null;`);
    // What a notification answers as `target_users`: a user_ids send's count of ids, an audience's
    // count of distinct users, written when its fanout starts.
    this.addSql(`alter table "notifications" add column "target_users" integer not null default 0;`);
    this.addSql(`update "notifications" set "target_users" = cardinality("user_ids");`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "notifications" drop column "target_users";`);
    this.addSql(`alter table "notifications" drop column "segment", drop column "audience";`);
    this.addSql(`drop table if exists "segments" cascade;`);
    this.addSql(`drop index "installations_tags_index";`);
    this.addSql(`alter table "installations" drop column "tags";`);
  }

}
