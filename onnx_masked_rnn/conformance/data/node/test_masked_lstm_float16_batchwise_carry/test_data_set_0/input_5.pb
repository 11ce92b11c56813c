
B	initial_cJ»µŠ°\4k·\±:¹