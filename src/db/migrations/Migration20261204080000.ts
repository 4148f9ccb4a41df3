import { Migration } from '@mikro-orm/migrations';

export class Migration20261204080000 extends Migration {

  override name = 'Migration20261204080000';

  override up(): void | Promise<void> {
    // Whether another installation of the application holds (or held) the same push identifier: an
    // audience count groups those few by identifier (one device, one push) and counts every other
    // installation as itself, without grouping a million identifiers (db/sql/audiences.ts). Set by
    // a registration that meets another holder, never cleared: a stale true costs a little time,
    // never a wrong count. A constant default adds it without rewriting the table.
    this.addSql(`alter table "installations" add column "identifier_shared" boolean not null default false;`);
    this.addSql(`update "installations" i set "identifier_shared" = true
                   from (select "application_id", "provider_identifier" from "installations"
                          group by "application_id", "provider_identifier" having count(*) > 1) s
                  where i."application_id" = s."application_id" and i."provider_identifier" = s."provider_identifier";`);
    // What an audience count reads for every installation a visible push may reach, in user
    // order: an index-only scan counts distinct users as it goes, with no hash of a million user
    // ids. Its predicate names the permission so that only a statement saying it (the count's
    // eligibility) can use it: the fanout's probe by user keeps its own index, and is not left to a
    // cost estimate's choice between two indexes of the same key. last_seen_at is left out on
    // purpose: every launch's registration moves it, and indexing it would end the in-place (HOT)
    // updates those registrations get.
    this.addSql(`create index "installations_audience_index" on "installations" ("application_id", "user_id")
                   include ("platform", "permission", "identifier_shared") where "status" = 'active' and "permission" <> 'denied';`);
    // The few active installations sharing an identifier, in the order a count groups them.
    this.addSql(`create index "installations_shared_identifier_index" on "installations" ("application_id", "platform", "provider_identifier")
                   where "identifier_shared" and "status" = 'active';`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index "installations_shared_identifier_index";`);
    this.addSql(`drop index "installations_audience_index";`);
    this.addSql(`alter table "installations" drop column "identifier_shared";`);
  }

}
