-- Named target credentials (packages/shared/src/credentials, docs/architecture.md §10). The
-- secrets (OAuth2 client, mTLS key, proxy) are sealed with AES-256-GCM under a data key of each
-- row's own; the data key is stored wrapped by the master key `master_key_id`
-- (CREDENTIALS_MASTER_KEY). `version` grows with every rotation, so caches keyed by it (tokens,
-- TLS agents) never serve a replaced secret.
create table if not exists requester_credentials (
  id            text        primary key,
  name          text        not null,
  version       integer     not null default 1,
  data          bytea       not null,
  wrapped_key   bytea       not null,
  master_key_id text        not null,
  summary       jsonb       not null,
  created_at    timestamptz not null default now(),
  rotated_at    timestamptz,
  revoked_at    timestamptz
);
-- Requests name a credential (meta.credentials): one live credential per name.
create unique index if not exists requester_credentials_live_name on requester_credentials (name)
  where revoked_at is null;
-- Which credentials an API key may name; null = none.
alter table requester_api_keys add column if not exists credentials text[];
