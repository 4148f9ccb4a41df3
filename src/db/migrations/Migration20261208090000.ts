import { Migration } from '@mikro-orm/migrations';

// audience_apply as in Migration20261206090000, but taking the users' rows in one order (by
// application, then user). A move between two users takes both rows, and two moves between the
// same two users in opposite directions deadlocked now and then: the grouping's output order is
// not one a query promises (a hash aggregate's, a sort's), so each could hold one and wait for the
// other.
const apply = (order: string) => `create or replace function "audience_apply"(application_ids uuid[], user_ids text[], differences int[]) returns void language plpgsql as $$
      begin
        with change as (
          select c.application_id, c.user_id, sum(c.difference)::int as difference
            from unnest(application_ids, user_ids, differences) c (application_id, user_id, difference)
           where exists (select from applications a where a.id = c.application_id)
           group by c.application_id, c.user_id
          having sum(c.difference) <> 0
        ), counted as (
          insert into audience_users as u (application_id, user_id, installations)
          select application_id, user_id, difference from change where user_id is not null${order}
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
      end $$;`;

export class Migration20261208090000 extends Migration {

  override name = 'Migration20261208090000';

  override up(): void | Promise<void> {
    this.addSql(apply(' order by application_id, user_id'));
  }

  override down(): void | Promise<void> {
    this.addSql(apply(''));
  }

}
