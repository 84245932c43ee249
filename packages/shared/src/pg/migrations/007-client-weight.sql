-- A client's share of the workers (docs/architecture.md §6, "Fair share between clients"):
-- `requester keys create|update --weight N` stores it here, with the key, and writes it into the
-- queue's shards in Redis (where lease reads it, in the shard's slot). A Redis that lost it (no
-- AOF, a new instance) gets it back from `requester keys update <key> --weight N`.
-- Independent of the others: the runner applies every unrecorded file in name order.
alter table requester_api_keys add column if not exists weight integer not null default 1;
