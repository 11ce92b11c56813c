
B	initial_hJ'¸œ·Æ²+´Æ)ÿ8