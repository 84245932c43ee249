-- Where each credential may be sent (docs/architecture.md §10, "Target credentials"): its origins,
-- `scheme://host:port`, named when it is created. Null on rows written before: such a credential
-- is refused (at the door and in the executor) until an operator names its origins with
-- `requester credentials set-origins <name> --origins …`.
alter table requester_credentials add column if not exists origins text[];
-- A key whose callers may send their own Host header (virtual hosts behind one address); without
-- it a Host header must name the request URI's host.
alter table requester_api_keys add column if not exists virtual_hosts boolean not null default false;
