-- API keys of the HTTP API (packages/ingress/src/keys). The token `rqk_<id>_<secret>` is shown
-- once; only SHA-256(secret) is kept (the secret is 256 random bits: a slow hash adds nothing).
-- A rotation moves the old hash to previous_hash, valid until previous_expires_at.
create table if not exists requester_api_keys (
  id                  text        primary key,
  name                text        not null,
  secret_hash         bytea       not null,
  previous_hash       bytea,
  previous_expires_at timestamptz,
  hosts               text[],
  rate                text,
  sync                boolean     not null default false,
  schedule            boolean     not null default false,
  max_body_bytes      integer,
  created_at          timestamptz not null default now(),
  rotated_at          timestamptz,
  revoked_at          timestamptz
);
-- The name travels in every envelope (meta.client) and owns its results: one live key per name.
create unique index if not exists requester_api_keys_live_name on requester_api_keys (name)
  where revoked_at is null;
