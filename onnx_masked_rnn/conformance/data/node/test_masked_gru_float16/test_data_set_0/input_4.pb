
B	initial_hJY´ò5=1j¬:¹¼&µ&1r0N8V5#±