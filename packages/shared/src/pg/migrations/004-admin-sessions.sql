-- Sessions of the operator UI (packages/requester/src/admin-server/sessions.ts). The cookie holds
-- a random session id, never the API key; only SHA-256(id) is kept. A session belongs to the key
-- that logged in and to the secret it was opened with (key_hash): it ends at expires_at, at
-- logout (the row is deleted), and as soon as its key is revoked, loses its admin scope, or the
-- secret is rotated away (replaced, and past its grace period).
create table if not exists requester_admin_sessions (
  id_hash     bytea       primary key,
  key_id      text        not null references requester_api_keys (id) on delete cascade,
  key_hash    bytea       not null,
  created_at  timestamptz not null default now(),
  expires_at  timestamptz not null
);
create index if not exists requester_admin_sessions_expires_at on requester_admin_sessions (expires_at);
