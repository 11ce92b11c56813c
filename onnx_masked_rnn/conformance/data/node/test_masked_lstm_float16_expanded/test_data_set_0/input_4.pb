
B	initial_hJÀ/í¶×6f´©±6K9¶¡«Z7 8š/