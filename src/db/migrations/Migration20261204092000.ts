import { Migration } from '@mikro-orm/migrations';

export class Migration20261204092000 extends Migration {

  override name = 'Migration20261204092000';

  override up(): void | Promise<void> {
    // GET /api/v1/tags: each application's tag keys and most common values, computed by a worker
    // job (db/sql/tags.ts) when the installations changed: `changed_at`, set by the installation
    // writes, later than (or just before) the computation's `refreshed_at`. A row only for an
    // application that asked for its summary.
    this.addSql(`create table "tag_summaries" (
      "application_id" uuid not null, "summary" jsonb not null default '[]', "refreshed_at" timestamptz null,
      "changed_at" timestamptz null, "created_at" timestamptz not null default now(),
      constraint "tag_summaries_pkey" primary key ("application_id"));`);
    this.addSql(`alter table "tag_summaries" add constraint "tag_summaries_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "tag_summaries";`);
  }

}
