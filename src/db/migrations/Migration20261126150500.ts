import { Migration } from '@mikro-orm/migrations';

export class Migration20261126150500 extends Migration {

  override name = 'Migration20261126150500';

  override up(): void | Promise<void> {
    // Webhooks. An application's endpoints (`herald webhooks`), with their sealed signing secrets
    // and how their last attempt went.
    this.addSql(`create table "webhook_endpoints" ("id" uuid not null, "application_id" uuid not null, "url" text not null, "events" text[] not null, "secret" text not null, "previous_secret" text null, "previous_secret_expires_at" timestamptz null, "created_at" timestamptz not null, "disabled_at" timestamptz null, "disabled_reason" text null, "failing_since" timestamptz null, "last_attempt" jsonb null, primary key ("id"));`);
    this.addSql(`create index "webhook_endpoints_application_id_index" on "webhook_endpoints" ("application_id");`);
    this.addSql(`alter table "webhook_endpoints" add constraint "webhook_endpoints_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);

    // The outbox: an event is written in the transaction of the change it reports, with one
    // delivery per endpoint that takes it; the jobs that send them are queued in that transaction too.
    this.addSql(`create table "webhook_events" ("id" uuid not null, "application_id" uuid not null, "type" text not null, "data" jsonb not null, "created_at" timestamptz not null, primary key ("id"));`);
    this.addSql(`create index "webhook_events_created_at_index" on "webhook_events" ("created_at");`);
    this.addSql(`alter table "webhook_events" add constraint "webhook_events_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);
    this.addSql(`alter table "webhook_events" add constraint "webhook_events_type_check" check ("type" in ('notification.completed', 'delivery.failed', 'installation.invalidated', 'event.reported'));`);

    this.addSql(`create table "webhook_deliveries" ("id" uuid not null, "application_id" uuid not null, "endpoint_id" uuid not null, "event_id" uuid not null, "state" text not null, "reason" text null, "attempts" int not null default 0, "status_code" int null, "error" text null, "response_excerpt" text null, "created_at" timestamptz not null, "last_attempt_at" timestamptz null, "next_attempt_at" timestamptz null, "completed_at" timestamptz null, primary key ("id"));`);
    this.addSql(`create index "webhook_deliveries_event_id_index" on "webhook_deliveries" ("event_id");`);
    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_endpoint_id_event_id_unique" unique ("endpoint_id", "event_id");`);
    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_endpoint_id_foreign" foreign key ("endpoint_id") references "webhook_endpoints" ("id") on delete cascade;`);
    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_event_id_foreign" foreign key ("event_id") references "webhook_events" ("id") on delete cascade;`);
    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_state_check" check ("state" in ('pending', 'succeeded', 'failed'));`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table "webhook_deliveries";`);
    this.addSql(`drop table "webhook_events";`);
    this.addSql(`drop table "webhook_endpoints";`);
  }

}
