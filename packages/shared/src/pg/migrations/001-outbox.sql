-- The outbox: tasks due later than the Redis horizon (scheduled far ahead, long backoffs).
-- The relay moves due rows back into Kafka `in` (FOR UPDATE SKIP LOCKED) and deletes a row only
-- after the broker acknowledged it. `task_id` (requestId:tryCount) makes router replays idempotent.
create table if not exists outbox (
  id         bigserial primary key,
  task_id    text        not null unique,
  request_id text        not null,
  due_at     timestamptz not null,
  topic      text        not null,
  kafka_key  text,
  payload    bytea       not null,
  created_at timestamptz not null default now()
);
create index if not exists outbox_due_at on outbox (due_at, id);
