-- A relay claims a batch by writing a lease into next_retry_time and its
-- batch's token here, in a short transaction of its own; it publishes with no
-- transaction open, then settles the rows that still carry its token. A
-- relay whose lease ran out (it stalled, or died) cannot overwrite what the
-- relay that claimed the rows after it did.
ALTER TABLE local_message ADD COLUMN claim_token CHAR(16) NULL AFTER next_retry_time;
