DROP TABLE stock_reservation;
