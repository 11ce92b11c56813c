
B	initial_hJÃº‹¹ß5Ç¯1É6