B	initial_hJJLó¾ª
È¾UÉ—¼ÿ.¾Ô½<M©Õ>