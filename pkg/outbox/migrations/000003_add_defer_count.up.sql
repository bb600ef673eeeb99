-- A publish that fails because NATS or JetStream is unreachable says
-- nothing about the message, so it must not spend the row's retry budget
-- (retry_count): an outage longer than the retry span would otherwise turn
-- every pending row failed. defer_count counts those deferrals instead and
-- drives their backoff, so polls during a long outage still space out.
ALTER TABLE local_message
  ADD COLUMN defer_count INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'publishes deferred by a NATS outage; they do not count as retries' AFTER retry_count;
