-- Cancels (packages/shared/src/cancel, docs/architecture.md §14) wake the outbox rows of one
-- request, found by its requestId: without this index every cancel would read the whole outbox.
create index if not exists outbox_request_id on outbox (request_id);
