import { Migration } from '@mikro-orm/migrations';

// Whether an installation row counts in the kept audience count: eligible for a visible push
// (db/sql/audiences.ts eligibleForVisiblePush) and sharing no identifier (those few are grouped by
// identifier live). 1 or 0, so that a change is a difference of two of them.
const kept = (row: string) =>
  `(case when ${row}.status = 'active' and ${row}.permission <> 'denied' and not (${row}.platform = 'ios' and ${row}.permission = 'not_determined')
          and not ${row}.identifier_shared then 1 else 0 end)`;

// The UTC day an installation was last seen on.
const seenOn = (row: string) => `(${row}.last_seen_at at time zone 'UTC')::date`;

export class Migration20261206090000 extends Migration {

  override name = 'Migration20261206090000';

  // One schema change's statements in the order they must run: the tables, the triggers that keep
  // them, the backfill. A migration is applied once and never edited, so it is not split up.
  override up(): void | Promise<void> {
    // An `all: true` count read from what installation writes keep up to date, rather than from a
    // million index entries grouped by user (db/sql/audiences.ts countAudience). Per user, how many
    // of their installations count: what tells a user's first installation from their second. A
    // row that falls to 0 stays until housekeeping's fold: one statement less for every write.
    this.addSql(`create table "audience_users" (
      "application_id" uuid not null references "applications" ("id") on delete cascade,
      "user_id" text not null,
      "installations" int not null,
      primary key ("application_id", "user_id"));`);
    // The totals as rows of differences, summed on read: each write appends its own row, so
    // concurrent registrations never wait on one counter row (nor deadlock over several);
    // housekeeping folds them into one row per application (worker/maintenance.ts).
    this.addSql(`create table "audience_totals" (
      "id" bigint generated always as identity primary key,
      "application_id" uuid not null references "applications" ("id") on delete cascade,
      "installations" bigint not null,
      "users" bigint not null);`);
    this.addSql(`create index "audience_totals_application_id_index" on "audience_totals" ("application_id");`);
    // What a count with conditions reads instead of the installations: the same kept rows, with
    // only what platform, tag and activity conditions test, in rows far narrower than the
    // installations' (their pages are what such a count spent its time on). Activity
    // is kept as the UTC day last seen: written when the day changes, at most once a day a device,
    // where last_seen_at moves at every launch (and stays out of every index, so that those
    // updates stay in place). The count rechecks last_seen_at itself for the one day the cutoff
    // falls in. No foreign key: the installations' triggers add and remove its rows.
    this.addSql(`create table "audience_members" (
      "id" uuid not null primary key,
      "application_id" uuid not null,
      "user_id" text null,
      "platform" text not null,
      "tags" jsonb not null,
      "seen_on" date not null);`);
    // What a count reads without visiting the table: platform and day narrow the range, tags are
    // tested on the entries, and id serves the cutoff day's check. seen_on being indexed makes the
    // daily rewrite a new index entry (this table's, never the installations').
    this.addSql(`create index "audience_members_audience_index" on "audience_members" ("application_id", "platform", "seen_on")
                   include ("user_id", "id", "tags");`);
    // A tag condition matching few rows finds them here instead.
    this.addSql(`create index "audience_members_tags_index" on "audience_members" using gin ("tags");`);
    // Index-only scans read the heap for pages changed since the last vacuum: vacuumed after 2 %
    // of its rows changed rather than the default 20 %, cheap on rows this narrow.
    this.addSql(`alter table "audience_members" set (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02);`);

    // Applies changes of the kept count, one (application, user, difference) each; a null user is
    // an installation without one, which counts as a user of its own. A user is counted while they
    // have an installation that counts. Changes of an application being deleted are dropped (its
    // rows go with it by cascade, and an insert naming it would fail its foreign key).
    this.addSql(`create function "audience_apply"(application_ids uuid[], user_ids text[], differences int[]) returns void language plpgsql as $$
      begin
        with change as (
          select c.application_id, c.user_id, sum(c.difference)::int as difference
            from unnest(application_ids, user_ids, differences) c (application_id, user_id, difference)
           where exists (select from applications a where a.id = c.application_id)
           group by c.application_id, c.user_id
          having sum(c.difference) <> 0
        ), counted as (
          insert into audience_users as u (application_id, user_id, installations)
          select application_id, user_id, difference from change where user_id is not null
          on conflict (application_id, user_id) do update set installations = u.installations + excluded.installations
          returning u.application_id, u.user_id, u.installations
        ), totals as (
          select c.application_id, c.difference as installations,
                 case when u.installations > 0 and u.installations - c.difference <= 0 then 1
                      when u.installations <= 0 and u.installations - c.difference > 0 then -1 else 0 end as users
            from counted u join change c on c.application_id = u.application_id and c.user_id = u.user_id
          union all
          select application_id, difference, difference from change where user_id is null
        )
        insert into audience_totals (application_id, installations, users)
        select application_id, sum(installations), sum(users) from totals group by application_id;
      end $$;`);
    // Inserts and deletes by statement, over their transition table: a bulk import or an
    // application's cascade is one call, not one a row. A registration's upsert fires the insert
    // trigger even when it updates: one look at an empty table then.
    this.addSql(`create function "installations_audience_inserted"() returns trigger language plpgsql as $$
      begin
        if not exists (select from changed) then
          return null;
        end if;
        insert into audience_members (id, application_id, user_id, platform, tags, seen_on)
        select n.id, n.application_id, n.user_id, n.platform, n.tags, ${seenOn('n')} from changed n where ${kept('n')} = 1;
        perform audience_apply(array_agg(n.application_id), array_agg(n.user_id), array_agg(1))
           from changed n where ${kept('n')} = 1 having count(*) > 0;
        return null;
      end $$;`);
    this.addSql(`create function "installations_audience_deleted"() returns trigger language plpgsql as $$
      begin
        delete from audience_members m using changed o where m.id = o.id;
        perform audience_apply(array_agg(o.application_id), array_agg(o.user_id), array_agg(-1))
           from changed o where ${kept('o')} = 1 having count(*) > 0;
        return null;
      end $$;`);
    // Updates by row, behind the trigger's WHEN: a registration that changes none of the columns
    // read (an app's launch the same UTC day as its last: last_seen_at and device) runs no function.
    this.addSql(`create function "installations_audience_updated"() returns trigger language plpgsql as $$
      begin
        if ${kept('new')} = 1 then
          insert into audience_members (id, application_id, user_id, platform, tags, seen_on)
          values (new.id, new.application_id, new.user_id, new.platform, new.tags, ${seenOn('new')})
          on conflict (id) do update set application_id = excluded.application_id, user_id = excluded.user_id,
            platform = excluded.platform, tags = excluded.tags, seen_on = excluded.seen_on;
        else
          delete from audience_members where id = old.id;
        end if;
        if (old.application_id, old.user_id, ${kept('old')}) is distinct from (new.application_id, new.user_id, ${kept('new')}) then
          perform audience_apply(array[old.application_id, new.application_id], array[old.user_id, new.user_id],
                                 array[-${kept('old')}, ${kept('new')}]);
        end if;
        return null;
      end $$;`);
    this.addSql(`create trigger "installations_audience_inserted" after insert on "installations"
                   referencing new table as changed for each statement execute function installations_audience_inserted();`);
    this.addSql(`create trigger "installations_audience_deleted" after delete on "installations"
                   referencing old table as changed for each statement execute function installations_audience_deleted();`);
    this.addSql(`create trigger "installations_audience_updated" after update on "installations" for each row
                   when ((old.application_id, old.user_id, old.status, old.permission, old.platform, old.identifier_shared, old.tags, ${seenOn('old')})
                         is distinct from (new.application_id, new.user_id, new.status, new.permission, new.platform, new.identifier_shared, new.tags, ${seenOn('new')}))
                   execute function installations_audience_updated();`);
    // Everything the triggers keep, computed again from the installations: what this migration
    // does for the installations already there, and what a load that turned triggers off
    // (`session_replication_role = replica`, bench/support.ts bulkLoad) runs after it. The share
    // lock holds off writes until the caller's transaction ends, so none is missed or counted twice.
    this.addSql(`create function "audience_rebuild"() returns void language plpgsql as $$
      begin
        lock table installations in share mode;
        delete from audience_members;
        delete from audience_users;
        delete from audience_totals;
        insert into audience_members (id, application_id, user_id, platform, tags, seen_on)
        select i.id, i.application_id, i.user_id, i.platform, i.tags, ${seenOn('i')} from installations i where ${kept('i')} = 1;
        insert into audience_users (application_id, user_id, installations)
        select i.application_id, i.user_id, count(*) from installations i
         where ${kept('i')} = 1 and i.user_id is not null group by i.application_id, i.user_id;
        insert into audience_totals (application_id, installations, users)
        select i.application_id, count(*), count(distinct i.user_id) + count(*) filter (where i.user_id is null)
          from installations i where ${kept('i')} = 1 group by i.application_id;
      end $$;`);
    this.addSql(`select audience_rebuild();`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop trigger "installations_audience_updated" on "installations";`);
    this.addSql(`drop trigger "installations_audience_deleted" on "installations";`);
    this.addSql(`drop trigger "installations_audience_inserted" on "installations";`);
    this.addSql(`drop function "installations_audience_updated"();`);
    this.addSql(`drop function "installations_audience_deleted"();`);
    this.addSql(`drop function "installations_audience_inserted"();`);
    this.addSql(`drop function "audience_rebuild"();`);
    this.addSql(`drop function "audience_apply"(uuid[], text[], int[]);`);
    this.addSql(`drop table "audience_members";`);
    this.addSql(`drop table "audience_totals";`);
    this.addSql(`drop table "audience_users";`);
  }

}
