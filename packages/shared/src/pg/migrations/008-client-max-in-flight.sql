-- A client's cap of tasks in flight across every executor (docs/architecture.md §6, "Per-client
-- cap"): `requester keys create|update --max-in-flight N` stores it here, with the key, and writes
-- it into the queue in Redis (every shard, and the client's own slot where its slots are counted).
-- 0 = no cap. A Redis that lost it gets it back from `requester keys update <key> --max-in-flight N`.
-- Independent of the others: the runner applies every unrecorded file in name order.
alter table requester_api_keys add column if not exists max_in_flight integer not null default 0;
