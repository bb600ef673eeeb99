DROP TABLE IF EXISTS payment_transaction_broken;
