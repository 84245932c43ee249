-- Destinations (packages/shared/src/destinations, docs/architecture.md §10 "Destinations"): a
-- partner API defined once by operators, which requests name (`meta.destination`) with a relative
-- URI. Each create or update is a new row, its version one more than the name's last; a delete
-- marks every version of the name. `spec` holds the base URL, static headers, credential name,
-- limiter, retry policy and body limit: no secret (a secret travels in a named credential).
create table if not exists requester_destinations (
  name       text        not null,
  version    integer     not null,
  spec       jsonb       not null,
  created_at timestamptz not null default now(),
  created_by text,
  deleted_at timestamptz,
  primary key (name, version)
);
-- Which destinations an API key may call; null = any, and absolute URIs too. A key limited to
-- destinations cannot call an absolute URI at all.
alter table requester_api_keys add column if not exists destinations text[];
