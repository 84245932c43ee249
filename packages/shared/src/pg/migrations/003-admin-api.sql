-- The admin API and operator UI of the admin port (packages/requester/src/admin-server): a key's
-- admin scope — null: none (the HTTP API only), 'read': sees the admin views, 'write': also acts.
alter table requester_api_keys add column if not exists admin text
  check (admin is null or admin in ('read', 'write'));
-- Dead letters an operator marked as handled ("deleted" from the UI or `requester dlq delete`):
-- the DLQ is a Kafka topic whose records cannot be removed one by one, so a handled one is
-- remembered here, by its position on the topic, and left out of the lists from then on.
create table if not exists requester_dead_letters_handled (
  dlq_ref     text        primary key,
  request_id  text,
  handled_by  text        not null,
  handled_at  timestamptz not null default now()
);
