-- product_copy_jobs is one accepted batch-copy request. request_id is the
-- caller's id for the request: resubmitting it returns the same job.
CREATE TABLE product_copy_jobs (
  id            CHAR(36)        NOT NULL,
  request_id    VARCHAR(64)     NOT NULL,
  target_brand  VARCHAR(64)     NOT NULL,
  on_duplicate  VARCHAR(8)      NOT NULL COMMENT 'skip or fail',
  total         INT             NOT NULL,
  chunks        INT             NOT NULL,
  created_at    DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_product_copy_jobs_request (request_id)
) ENGINE=InnoDB;

-- product_copy_chunks is one message's worth of a job. Its counters are
-- written by a conditional update (status = 'pending') in the same
-- transaction as the products it created, so a redelivered message can never
-- count twice; a job's progress is the sum over its chunks, which keeps the
-- concurrent workers off a single hot row.
CREATE TABLE product_copy_chunks (
  job_id      CHAR(36)        NOT NULL,
  seq         INT             NOT NULL,
  size        INT             NOT NULL,
  status      VARCHAR(8)      NOT NULL COMMENT 'pending, done, failed',
  created     INT             NOT NULL DEFAULT 0,
  skipped     INT             NOT NULL DEFAULT 0,
  failed      INT             NOT NULL DEFAULT 0,
  error       VARCHAR(1024)   NOT NULL DEFAULT '',
  duplicates  MEDIUMTEXT      NULL COMMENT 'JSON list of the duplicates met',
  updated_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (job_id, seq)
) ENGINE=InnoDB;
