-- An API key's default start-by deadline (issue 45, `keys create|update --deadline`): a Go duration
-- the ingress gives each of its requests that names no `meta.deadline`, counted from when the task
-- is first due; null = none. A destination's default lives in its spec (JSON), with no column.
alter table requester_api_keys add column if not exists deadline text;
