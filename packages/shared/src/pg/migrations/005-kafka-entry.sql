-- Kafka entry (packages/shared/src/entry, docs/architecture.md §10). Requester's own writers of
-- `in` (ingress, relay, DLQ replays) sign each record with a deployment secret kept here, created
-- by the first process that needs it; a record without that signature may claim only the client
-- of a key marked kafka_entry (`requester keys create|update --kafka-entry`), or none.
-- Independent of 004: the runner applies every unrecorded file in name order, a gap included.
create table if not exists requester_secrets (
  name       text        primary key,
  secret     bytea       not null,
  created_at timestamptz not null default now()
);
alter table requester_api_keys add column if not exists kafka_entry boolean not null default false;
