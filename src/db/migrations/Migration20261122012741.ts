import { Migration } from '@mikro-orm/migrations';

export class Migration20261122012741 extends Migration {

  override name = 'Migration20261122012741';

  override up(): void | Promise<void> {
    this.addSql(`create table "applications" ("id" uuid not null, "name" text not null, "created_at" timestamptz not null, primary key ("id"));`);

    this.addSql(`create table "api_tokens" ("id" uuid not null, "application_id" uuid not null, "name" text not null, "public_id" text not null, "secret_hash" text not null, "abilities" text[] not null, "created_at" timestamptz not null, "revoked_at" timestamptz null, primary key ("id"));`);
    this.addSql(`create index "api_tokens_application_id_index" on "api_tokens" ("application_id");`);
    this.addSql(`alter table "api_tokens" add constraint "api_tokens_public_id_unique" unique ("public_id");`);

    this.addSql(`create table "installations" ("id" uuid not null, "application_id" uuid not null, "installation_id" text not null, "platform" text not null, "provider_identifier" text not null, "status" text not null, "permission" text not null, "user_id" text null, "device" jsonb not null, "registered_at" timestamptz not null, "last_seen_at" timestamptz not null, "identifier_updated_at" timestamptz not null, "permission_updated_at" timestamptz not null, "invalidated_at" timestamptz null, "invalid_reason" text null, primary key ("id"));`);
    this.addSql(`create index "installations_application_id_user_id_index" on "installations" ("application_id", "user_id");`);
    this.addSql(`create index "installations_application_id_provider_identifier_index" on "installations" ("application_id", "provider_identifier");`);
    this.addSql(`alter table "installations" add constraint "installations_application_id_installation_id_unique" unique ("application_id", "installation_id");`);
    this.addSql(`alter table "installations" add constraint "installations_platform_check" check ("platform" in ('ios', 'android'));`);
    this.addSql(`alter table "installations" add constraint "installations_status_check" check ("status" in ('active', 'invalid'));`);
    this.addSql(`alter table "installations" add constraint "installations_permission_check" check ("permission" in ('unknown', 'not_determined', 'authorized', 'provisional', 'ephemeral', 'denied'));`);

    this.addSql(`create table "notifications" ("id" uuid not null, "application_id" uuid not null, "status" text not null, "title" text null, "body" text null, "image_url" text null, "action_url" text null, "data" jsonb not null, "options" jsonb not null, "user_ids" text[] not null, "created_at" timestamptz not null, "processing_started_at" timestamptz null, "completed_at" timestamptz null, primary key ("id"));`);
    this.addSql(`create index "notifications_application_id_id_index" on "notifications" ("application_id", "id");`);
    this.addSql(`alter table "notifications" add constraint "notifications_status_check" check ("status" in ('queued', 'processing', 'completed', 'partial', 'failed'));`);

    this.addSql(`create table "idempotency_keys" ("id" uuid not null, "application_id" uuid not null, "key" text not null, "request_hash" text not null, "notification_id" uuid not null, "created_at" timestamptz not null, primary key ("id"));`);
    this.addSql(`create index "idempotency_keys_created_at_index" on "idempotency_keys" ("created_at");`);
    this.addSql(`alter table "idempotency_keys" add constraint "idempotency_keys_application_id_key_unique" unique ("application_id", "key");`);

    this.addSql(`create table "deliveries" ("id" uuid not null, "application_id" uuid not null, "notification_id" uuid not null, "installation_id" uuid null, "client_installation_id" text not null, "user_id" text null, "platform" text not null, "state" text not null, "reason" text null, "attempts" int not null default 0, "created_at" timestamptz not null, "completed_at" timestamptz null, "received_at" timestamptz null, "displayed_at" timestamptz null, "opened_at" timestamptz null, "dismissed_at" timestamptz null, primary key ("id"));`);
    this.addSql(`create index "deliveries_installation_id_index" on "deliveries" ("installation_id");`);
    this.addSql(`create index "deliveries_notification_id_state_index" on "deliveries" ("notification_id", "state");`);
    this.addSql(`alter table "deliveries" add constraint "deliveries_notification_id_installation_id_unique" unique ("notification_id", "installation_id");`);
    this.addSql(`alter table "deliveries" add constraint "deliveries_platform_check" check ("platform" in ('ios', 'android'));`);
    this.addSql(`alter table "deliveries" add constraint "deliveries_state_check" check ("state" in ('pending', 'accepted', 'failed', 'skipped'));`);

    this.addSql(`create table "delivery_events" ("id" uuid not null, "application_id" uuid not null, "event_id" uuid not null, "delivery_id" uuid not null, "client_installation_id" text not null, "type" text not null, "occurred_at" timestamptz not null, "received_at" timestamptz not null, primary key ("id"));`);
    this.addSql(`create index "delivery_events_delivery_id_index" on "delivery_events" ("delivery_id");`);
    this.addSql(`alter table "delivery_events" add constraint "delivery_events_application_id_event_id_unique" unique ("application_id", "event_id");`);
    this.addSql(`alter table "delivery_events" add constraint "delivery_events_type_check" check ("type" in ('received', 'displayed', 'opened', 'dismissed'));`);

    this.addSql(`alter table "api_tokens" add constraint "api_tokens_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);

    this.addSql(`alter table "installations" add constraint "installations_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);

    this.addSql(`alter table "notifications" add constraint "notifications_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);

    this.addSql(`alter table "idempotency_keys" add constraint "idempotency_keys_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);
    this.addSql(`alter table "idempotency_keys" add constraint "idempotency_keys_notification_id_foreign" foreign key ("notification_id") references "notifications" ("id") on delete cascade deferrable initially deferred;`);

    this.addSql(`alter table "deliveries" add constraint "deliveries_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);
    this.addSql(`alter table "deliveries" add constraint "deliveries_notification_id_foreign" foreign key ("notification_id") references "notifications" ("id") on delete cascade;`);
    this.addSql(`alter table "deliveries" add constraint "deliveries_installation_id_foreign" foreign key ("installation_id") references "installations" ("id") on delete set null;`);

    this.addSql(`alter table "delivery_events" add constraint "delivery_events_application_id_foreign" foreign key ("application_id") references "applications" ("id") on delete cascade;`);
    this.addSql(`alter table "delivery_events" add constraint "delivery_events_delivery_id_foreign" foreign key ("delivery_id") references "deliveries" ("id") on delete cascade;`);
  }

}
