ALTER TABLE local_message DROP COLUMN claim_token;
