B	initial_hJÆ©?v…>rûx>›*?"’Z=é4
?