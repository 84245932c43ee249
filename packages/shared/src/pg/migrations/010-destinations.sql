-- Destinations (packages/shared/src/destinations, docs/architecture.md §10 "Destinations"): a
-- partner API defined once by operators, which requests name (`meta.destination`) with a relative
-- URI. Each create or update is a new row, its version one more than the name's last; a delete
-- marks every version of the name. `spec` holds the base URL, static headers, credential name,
-- limiter, retry policy and body limit, and the names of the secret headers; their values are
-- sealed like a credential's secrets (AES-256-GCM under a data key of their own, wrapped by the
-- master key `secret_master_key_id`, CREDENTIALS_MASTER_KEY), bound to the destination's name.
create table if not exists requester_destinations (
  name                 text        not null,
  version              integer     not null,
  spec                 jsonb       not null,
  secret_data          bytea,
  secret_wrapped_key   bytea,
  secret_master_key_id text,
  created_at timestamptz not null default now(),
  created_by text,
  deleted_at timestamptz,
  primary key (name, version)
);
-- Which destinations an API key may call; null = any, and absolute URIs too. A key limited to
-- destinations cannot call an absolute URI at all.
alter table requester_api_keys add column if not exists destinations text[];
