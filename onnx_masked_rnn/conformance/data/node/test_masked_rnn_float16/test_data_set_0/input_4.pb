
B	initial_hJE´%0e2W6F5è¹ª9¶À7Sº4²$