-- Marking a row sent must touch as few indexes as possible: it is the
-- relay's hot path. An index on sent_at changes on every mark-sent; one on
-- created_at never changes after the insert, and the retention cleanup can
-- select by it just as well.
ALTER TABLE local_message
  DROP INDEX idx_local_message_sent,
  ADD INDEX idx_local_message_created (created_at);
